"""The text path: tool lists written as text into the system prompt (models without
native tool calling), found, split into entries, and pruned with the same selection.

A :class:`TextFormat` says where a tool block is and where each entry starts:
``start`` / ``end`` (regexes bounding the block; None: the first entry / the end of the
text), ``entry`` (a multi-line regex matching the start of an entry, capturing ``name``)
and ``stop`` (a line that is not an entry and matches it ends the block). Text inside
fenced code blocks is never taken for a tool entry. An entry runs
to the next entry or the end of the block. Presets: ``hermes`` (a ``<tools>`` block of
one JSON function schema per line, as Hermes/Qwen templates render tools), ``markdown``
(one ``## name`` section per tool, Cline style), ``lines`` (``- name: description`` or
``name(args): description`` lines).

Kept entries stay byte-for-byte as written, in order; dropped ones are replaced by ONE
line naming the other tools, which is all the escape hatch this path needs (the agent
executes any tool it knows). Pure functions, no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from selection.catalog.catalog import Catalog, Tool, build_catalog, fingerprint
from selection.conversation.query import content_text

_IDENTIFIER_LIKE = re.compile(r"[A-Za-z0-9]+(?:[_.-][A-Za-z0-9]+)+|[a-z]+[A-Z][A-Za-z0-9]*")
_FENCE = re.compile(r"^```.*?^```[^\n]*$", re.M | re.S)
_MARKDOWN_FIELDS = re.compile(r"^(?:description|parameters|usage)\s*:", re.I | re.M)


@dataclass(frozen=True)
class TextFormat:
    """How to find and split one kind of tool block (see the module docstring)."""

    name: str
    entry: re.Pattern[str]
    start: re.Pattern[str] | None = None
    end: re.Pattern[str] | None = None
    stop: re.Pattern[str] | None = None


PRESETS: tuple[TextFormat, ...] = (
    TextFormat(
        "hermes",
        entry=re.compile(r'^[ \t]*\{.*?"name"\s*:\s*"(?P<name>[^"]+)"', re.M),
        start=re.compile(r"<tools>\n?"),
        end=re.compile(r"</tools>"),
    ),
    TextFormat(
        "markdown",
        entry=re.compile(r"^##[ \t]+`?(?P<name>[A-Za-z][\w.-]{0,63})`?[ \t]*\r?$", re.M),
        stop=re.compile(r"^#{1,2}\s"),
    ),
    TextFormat(
        "lines",
        entry=re.compile(
            r"^[ \t]*(?:[-*][ \t]+`?(?P<name>[A-Za-z][\w.-]{0,63})`?(?:\([^)\n]*\))?"
            r"|`?(?P<bare>[A-Za-z][\w.-]{0,63})`?\([^)\n]*\))[ \t]*:",
            re.M,
        ),
        stop=re.compile(r"^(?:\S|[ \t]*\r?$)"),
    ),
)


def custom_format(name: str, entry: str, start: str | None, end: str | None) -> TextFormat:
    """A user-defined format from the policy file. ``entry`` must have a ``name`` group.

    Raises ValueError on an invalid pattern.
    """
    try:
        compiled = re.compile(entry, re.M)
        start_pattern = re.compile(start) if start else None
        end_pattern = re.compile(end) if end else None
    except re.error as exc:
        raise ValueError(f"text format {name!r}: {exc}") from exc
    if "name" not in compiled.groupindex:
        raise ValueError(f"text format {name!r}: entry pattern needs a (?P<name>...) group")
    return TextFormat(
        name,
        entry=compiled,
        start=start_pattern,
        end=end_pattern,
    )


@dataclass(frozen=True)
class Entry:
    """One tool in a block: its name and ``[start, end)`` character span in the text."""

    name: str
    start: int
    end: int


@dataclass(frozen=True)
class ToolBlock:
    """A tool block found in a text: the format, the block's span and its entries."""

    format: str
    start: int
    end: int
    entries: tuple[Entry, ...]

    def catalog(self, text: str) -> Catalog:
        """The entries as a catalogue (name, the entry's text as description; a JSON
        entry's own description and parameters when it is one; ``size_bytes`` the
        entry's UTF-8 length)."""
        return build_catalog([_entry_tool(e, text[e.start : e.end]) for e in self.entries])

    def rewrite(self, text: str, keep: Iterable[str]) -> str:
        """``text`` with the entries not in ``keep`` removed and one line naming them
        added at the end of the block; unchanged when nothing is dropped."""
        kept = set(keep)
        dropped = [entry.name for entry in self.entries if entry.name not in kept]
        if not dropped:
            return text
        parts = [text[: self.entries[0].start]]
        for entry in self.entries:
            if entry.name in kept:
                parts.append(text[entry.start : entry.end])
        last = parts[-1]
        separator = "" if last.endswith("\n") else "\n"
        parts.append(separator + others_line(dropped) + "\n")
        parts.append(text[self.entries[-1].end :])
        return "".join(parts)


def others_line(names: Sequence[str]) -> str:
    """The line that stands for dropped entries (depends on the names only)."""
    return "Other tools you can also call by name: " + ", ".join(names) + "."


def _entry_tool(entry: Entry, text: str) -> Tool:
    description, parameters = text.strip(), {}
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, Mapping):
        function = parsed.get("function", parsed)
        if isinstance(function, Mapping):
            description = str(function.get("description") or description)
            params = function.get("parameters")
            parameters = params if isinstance(params, Mapping) else {}
    definition = {"type": "function", "function": {"name": entry.name, "description": description}}
    size = len(text.encode("utf-8", errors="backslashreplace"))
    return Tool(entry.name, description, parameters, definition, fingerprint(definition), size)


def _masked(text: str) -> str:
    """``text`` with fenced code blocks blanked (same length), so nothing inside them is
    taken for a tool entry."""
    return _FENCE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def find_blocks(text: str, fmt: TextFormat) -> Iterator[ToolBlock]:
    """The blocks of ``fmt`` in ``text``, in order. A block with repeated names, or a
    hermes block with a line that is not a JSON object, is skipped: an unparseable block
    is forwarded unchanged."""
    scan = _masked(text)
    position = 0
    while position < len(scan):
        region_start, region_end = position, len(scan)
        if fmt.start is not None:
            opened = fmt.start.search(scan, position)
            if opened is None:
                return
            region_start = opened.end()
            if fmt.end is not None:
                closed = fmt.end.search(scan, region_start)
                if closed is None:
                    return
                region_end = closed.start()
        first = fmt.entry.search(scan, region_start, region_end)
        if first is None:
            if fmt.start is None:
                return
            position = max(region_end, region_start, position + 1)
            continue
        if fmt.stop is not None:
            region_end = _stop_position(scan, fmt, first.start(), region_end)
        block = _block(text, fmt, [*fmt.entry.finditer(scan, first.start(), region_end)], region_start, region_end)
        if block is not None:
            yield block
        position = max(region_end, position + 1)


def _block(
    text: str, fmt: TextFormat, starts: list[re.Match[str]], region_start: int, region_end: int
) -> ToolBlock | None:
    entries = []
    for match, following in zip(starts, [*starts[1:], None], strict=True):
        end = following.start() if following is not None else region_end
        name = match.group("name") or match.groupdict().get("bare")
        entries.append(Entry(name, match.start(), end))
    if len({entry.name for entry in entries}) != len(entries):
        return None
    if fmt.name == "hermes" and not _all_json(text, entries, region_start, region_end):
        return None
    return ToolBlock(fmt.name, region_start, region_end, tuple(entries))


def _stop_position(scan: str, fmt: TextFormat, first: int, limit: int) -> int:
    """Where the block ends: the first line after ``first`` that matches ``stop`` and does
    not start an entry (the end of the line before it), else ``limit``."""
    assert fmt.stop is not None
    newline = scan.find("\n", first, limit)  # not a slice: a copy of the rest per block
    position = newline + 1 if newline != -1 else limit
    while position < limit:
        line_end = scan.find("\n", position, limit)
        line_end = limit if line_end == -1 else line_end
        line = scan[position:line_end]
        if fmt.stop.match(line) and not fmt.entry.match(line):
            return position
        position = line_end + 1
    return limit


def _all_json(text: str, entries: Sequence[Entry], start: int, end: int) -> bool:
    covered = text[start : entries[0].start].strip() == ""
    for entry in entries:
        try:
            parsed = json.loads(text[entry.start : entry.end])
        except ValueError:
            return False
        covered = covered and isinstance(parsed, Mapping)
    return covered and text[entries[-1].end : end].strip() == ""


def detect(text: str, formats: Sequence[TextFormat], min_entries: int) -> ToolBlock | None:
    """The first format whose block has at least ``min_entries`` entries and looks like
    tools (markdown sections with a ``Description:``/``Parameters:``/``Usage:`` line;
    mostly identifier-like names in ``lines``), or None."""
    for fmt in formats:
        for block in find_blocks(text, fmt):
            if _looks_like_tools(text, fmt, block, min_entries):
                return block
    return None


def _looks_like_tools(text: str, fmt: TextFormat, block: ToolBlock, min_entries: int) -> bool:
    if len(block.entries) < min_entries:
        return False
    if fmt.name == "markdown":
        return all(_MARKDOWN_FIELDS.search(text, e.start, e.end) for e in block.entries)
    if fmt.name == "lines":
        identifiers = sum(bool(_IDENTIFIER_LIKE.fullmatch(e.name)) for e in block.entries)
        return identifiers * 2 >= len(block.entries)
    return True


_XML_ELEMENT = re.compile(r"<([A-Za-z][\w.-]{0,63})>")
_JSON_NAME = re.compile(r'"(?:name|tool)"\s*:\s*"([^"]{1,64})"')


def text_called_tools(messages: Sequence[Any], names: set[str]) -> list[str]:
    """Catalogue tools that assistant messages called in text: ``<tool_call>{"name": …}
    </tool_call>``, an XML element named after a tool (``<read_file>``), or a JSON object
    whose ``"name"`` / ``"tool"`` names one. In order of appearance."""
    found: dict[str, None] = {}
    for message in messages:
        for candidate in text_call_candidates(message):
            if candidate in names:
                found.setdefault(candidate, None)
    return list(found)


def text_call_candidates(message: Any) -> list[str]:
    """The names an assistant ``message`` may call in text (see
    :func:`text_called_tools`), in order of appearance, whether or not a catalogue has
    them; none for any other message."""
    if not isinstance(message, Mapping) or message.get("role") != "assistant":
        return []
    content = content_text(message.get("content"))
    hits = [(m.start(), m.group(1)) for m in _XML_ELEMENT.finditer(content)]
    hits += [(m.start(), m.group(1)) for m in _JSON_NAME.finditer(content)]
    return [candidate for _, candidate in sorted(hits)]
