"""A tool block in a system (or developer) message's text: where it is and how the message
is rewritten to keep only the selected entries (the text path)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from selection.catalog.catalog import Catalog, build_catalog
from selection.catalog.text_path import TextFormat, ToolBlock, detect


@dataclass(frozen=True)
class TextPlan:
    """A tool block found in a system (or developer) message's text.

    ``message`` is the message's index in ``messages``; ``part`` the index of the text
    part when the content is a list of parts, else None.
    """

    message: int
    part: int | None
    text: str
    block: ToolBlock

    def rewrite_messages(self, messages: list[Any], keep: set[str]) -> list[Any]:
        """``messages`` with the block's dropped entries replaced by one line."""
        text = self.block.rewrite(self.text, keep)
        message = dict(messages[self.message])
        if self.part is None:
            message["content"] = text
        else:
            parts = list(message["content"])
            parts[self.part] = {**parts[self.part], "text": text}
            message["content"] = parts
        return [*messages[: self.message], message, *messages[self.message + 1 :]]


#: System and developer texts longer than this (characters, in all) are searched for a
#: tool block off the event loop: the search is linear, but megabytes of text would hold
#: every other request of the process meanwhile (as request bodies over 256 KiB are
#: decoded off it).
SEARCH_IN_THREAD_CHARS = 256 * 1024


def _system_texts(messages: Sequence[Any]) -> Iterator[tuple[int, int | None, str]]:
    """``(message index, part index or None, text)`` of each system or developer text."""
    for index, message in enumerate(messages):
        if not isinstance(message, dict | Mapping) or message.get("role") not in ("system", "developer"):
            continue
        content = message.get("content")
        if isinstance(content, str):
            yield index, None, content
        elif isinstance(content, list):
            for part, item in enumerate(content):
                if isinstance(item, Mapping) and isinstance(item.get("text"), str):
                    yield index, part, item["text"]


def find_text_plan(
    messages: Sequence[Any], formats: Sequence[TextFormat], min_entries: int
) -> TextPlan | None:
    """The first tool block (with at least ``min_entries`` entries) in a system or
    developer message, or None."""
    for index, part, text in _system_texts(messages):
        block = detect(text, formats, min_entries)
        if block is not None:
            return TextPlan(index, part, text, block)
    return None


async def search_text_plan(
    messages: Sequence[Any], formats: Sequence[TextFormat], min_entries: int
) -> TextPlan | None:
    """:func:`find_text_plan`, in a worker thread when the texts are longer than
    :data:`SEARCH_IN_THREAD_CHARS`."""
    if sum(len(text) for _, _, text in _system_texts(messages)) > SEARCH_IN_THREAD_CHARS:
        return await asyncio.to_thread(find_text_plan, messages, formats, min_entries)
    return find_text_plan(messages, formats, min_entries)


def selection_catalog(native: Catalog | None, text: TextPlan | None) -> Catalog:
    """What selection chooses from: the native tools, then text entries not among them."""
    if text is None:
        assert native is not None
        return native
    entries = text.block.catalog(text.text)
    if native is None:
        return entries
    names = set(native.names)
    extra = [tool for tool in entries.tools if tool.name not in names]
    return build_catalog([*native.tools, *extra], native.others, native.legacy)
