"""Example utterances harvested from the usage log (only when the proxy stored user text):
per tool the user messages that preceded its calls, and their rendering as a policy-file
``[examples]`` TOML fragment to review and adopt."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from proxy.usage.records import ExampleRecord, ExampleSuggestion, ToolUsage


def harvest_examples(
    records: Iterable[ExampleRecord], *, per_tool: int = 3, max_chars: int = 400
) -> dict[str, list[ExampleSuggestion]]:
    """Candidate example utterances per tool (see the module docstring). Whitespace is
    collapsed; empty texts and texts longer than ``max_chars`` are skipped."""
    conversations: dict[tuple[str, str], set[str]] = defaultdict(set)
    tools_of: dict[str, set[str]] = defaultdict(set)
    for record in records:
        text = " ".join(record.text.split())
        if not text or len(text) > max_chars:
            continue
        conversations[(record.tool, text)].add(record.conversation)
        tools_of[text].add(record.tool)
    by_tool: dict[str, list[ExampleSuggestion]] = defaultdict(list)
    for (tool, text), seen in conversations.items():
        by_tool[tool].append(ExampleSuggestion(text, len(seen), len(tools_of[text])))
    return {
        tool: sorted(items, key=lambda e: (-e.conversations, e.tools, e.text))[:per_tool]
        for tool, items in sorted(by_tool.items())
    }


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string (control characters escaped; a lone surrogate,
    not a Unicode scalar value, replaced)."""
    text = text.encode("utf-8", errors="replace").decode("utf-8")
    out = ['"']
    for char in text:
        code = ord(char)
        if char == '"':
            out.append('\\"')
        elif char == "\\":
            out.append("\\\\")
        elif char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04X}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def examples_toml(
    examples: Mapping[str, Sequence[ExampleSuggestion]], table: Sequence[ToolUsage] = ()
) -> str:
    """A policy-file ``[examples]`` fragment (see ``config/policy.py``) for ``examples``."""
    rows = {row.tool: row for row in table}
    lines = [
        "# Suggested example utterances, harvested from real user messages by",
        "# `toolprune usage report`: review them (they are user text) before adopting.",
        "[examples]",
    ]
    for tool, items in examples.items():
        if not items:
            continue
        row = rows.get(tool)
        if row is not None:
            lines.append(
                f"# {tool}: {row.calls} calls, {row.loaded} through load_tools, {row.misses} misses"
            )
        seen = ", ".join(f"{e.conversations}×" for e in items)
        lines.append(f"{toml_string(tool)} = [  # conversations: {seen}")
        lines.extend(f"    {toml_string(e.text)}," for e in items)
        lines.append("]")
    return "\n".join(lines) + "\n"
