"""Meta-calls a model wrote as text in ``content`` instead of ``tool_calls``.

Recognised forms (those ``selection.catalog.text_path.text_called_tools`` reads in assistant
history): a ``<tool_call>`` element holding a JSON object with ``name`` and ``arguments``
(Hermes and Qwen templates: what llama-server and Ollama leave in ``content`` when their
tool-call parser does not match), and a message that opens with a bare JSON object with
``name`` and ``arguments`` (or ``parameters``: Llama 3.x JSON tool calling). Only
objects naming a meta-tool are taken out of the text; everything else reaches the client
as written, at most held back until it is known not to be a meta-call.

:class:`TextCallFilter` works on content as it streams: text that may be the start of a
meta-call is held back (at most ``HOLD_LIMIT`` characters) until it is complete.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

OPEN_TAG = "<tool_call>"
CLOSE_TAG = "</tool_call>"
#: Longest text held back while it may still be a meta-call (characters).
HOLD_LIMIT = 16_384
_JSON_NAME = re.compile(r'"(?:name|tool)"\s*:\s*"([^"]{1,128})"')
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class TextCall:
    """A meta-call found in text: the function ``name`` and its ``arguments`` text
    (``""`` when the call was cut off or had none)."""

    name: str
    arguments: str


def _call_in(text: str, is_meta: Callable[[str | None], bool]) -> TextCall | None:
    """The meta-call ``text`` (one JSON object, maybe cut off) stands for, or None."""
    try:
        value, end = _DECODER.raw_decode(text.strip())
    except (json.JSONDecodeError, RecursionError):
        match = _JSON_NAME.search(text)  # cut off: the name alone says what it was
        return TextCall(match.group(1), "") if match and is_meta(match.group(1)) else None
    if end != len(text.strip()) or not isinstance(value, dict):
        return None
    name = value.get("name", value.get("tool"))
    if not isinstance(name, str) or not is_meta(name):
        return None
    arguments: Any = value.get("arguments", value.get("parameters"))
    if isinstance(arguments, str):
        return TextCall(name, arguments)
    return TextCall(name, "" if arguments is None else json.dumps(arguments, ensure_ascii=False))


def _names_other(text: str, is_meta: Callable[[str | None], bool]) -> bool:
    """Whether held text already names a function that is not a meta-tool."""
    match = _JSON_NAME.search(text)
    return match is not None and not is_meta(match.group(1))


def _partial_tag_suffix(text: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of ``<tool_call>``."""
    for length in range(min(len(OPEN_TAG) - 1, len(text)), 0, -1):
        if OPEN_TAG.startswith(text[-length:]):
            return length
    return 0


class TextCallFilter:
    """Takes content fragments, returns the text the client may see; collects the
    meta-calls written as text in ``calls``."""

    def __init__(self, is_meta: Callable[[str | None], bool]) -> None:
        self.is_meta = is_meta
        self.calls: list[TextCall] = []
        self._held = ""
        self._at_start = True  # nothing but whitespace shown so far

    def feed(self, text: str) -> str:
        self._held += text
        return self._release(final=False)

    def end(self) -> str:
        """The end of the content: held text is decided."""
        return self._release(final=True)

    def _release(self, *, final: bool) -> str:
        shown: list[str] = []
        while self._held:
            held = self._held
            if self._at_start and held.lstrip().startswith("{"):
                if not self._bare_json(held, final):
                    break
                continue
            if self._at_start and not held.strip() and not final:
                break  # leading whitespace: wait for what follows it
            start = held.find(OPEN_TAG)
            if start < 0:
                keep = 0 if final else _partial_tag_suffix(held)
                shown.append(held[: len(held) - keep])
                self._held = held[len(held) - keep :]
                self._at_start = self._at_start and not held[: len(held) - keep].strip()
                break
            if start > 0:
                shown.append(held[:start])
                self._at_start = self._at_start and not held[:start].strip()
                self._held = held = held[start:]
            if not self._element(held, final, shown):
                break
        return "".join(shown)

    def _bare_json(self, held: str, final: bool) -> bool:
        """Decide a message that opens with ``{``; False while undecided."""
        stripped = held.strip()
        try:
            _, end = _DECODER.raw_decode(stripped)
        except (json.JSONDecodeError, RecursionError):
            end = -1
        if end < 0 and not final and len(held) < HOLD_LIMIT and not _names_other(held, self.is_meta):
            return False
        call = _call_in(stripped[:end] if end >= 0 else stripped, self.is_meta)
        if call is None:
            self._at_start = False  # ordinary text (JSON output): shown from here on
            return True
        self.calls.append(call)
        self._held = stripped[end:].lstrip() if end >= 0 else ""
        return True

    def _element(self, held: str, final: bool, shown: list[str]) -> bool:
        """Decide a ``<tool_call>`` element at the start of ``held``; False while undecided."""
        close = held.find(CLOSE_TAG)
        inner = held[len(OPEN_TAG) : close if close >= 0 else len(held)]
        if close < 0 and not final and len(held) < HOLD_LIMIT and not _names_other(inner, self.is_meta):
            return False
        call = _call_in(inner, self.is_meta)
        end = close + len(CLOSE_TAG) if close >= 0 else len(held)
        if call is None:
            shown.append(held[:end])
            self._at_start = False
        else:
            self.calls.append(call)
        self._held = held[end:]
        return True
