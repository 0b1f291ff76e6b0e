"""Blocks a client writes into a user's message that are not the user's words.

Coding agents put context beside the prompt in the user message itself: Claude Code a
``<system-reminder>`` element (date, open files, reminders) as its own content block or
before the prompt, Codex ``<environment_context>`` and ``<user_instructions>`` messages,
others their kind. Embedded and matched with the prompt, their words steer selection: the
first request of a Claude Code session ranked eight task-list built-ins above
``mcp__github__list_pull_requests`` for "List the open pull requests in octo/widgets"
(issue 32).

They are found by structure, not by a list of names: a *block* is one whole XML-like
element — ``<tag …>…</tag>``, the tag a lower-case name (:data:`TAG`), the closing tag
the opening's — that is a content part on its own, or a leading or trailing span of a
text set on lines of its own (it starts a line and its closing tag ends one). A tag inside
a sentence ("make the <b>title</b> bold") is the user's and stays. Pure functions, no I/O.
"""

from __future__ import annotations

import re

#: A tag name as clients write them: ``system-reminder``, ``environment_context``.
TAG = r"[a-z][a-z0-9_-]*"
#: A leading block: the first element of the text, whole, its closing tag ending a line.
_LEADING = re.compile(
    rf"\A\s*<(?P<tag>{TAG})(?:\s[^<>]*)?>.*?</(?P=tag)\s*>[ \t]*(?:\n|\Z)", re.DOTALL
)
#: Blocks taken off each end of a text at most (each look is linear in the text).
MAX_BLOCKS = 32
#: The closing tag that ends a text (a trailing block's end).
_CLOSING_AT_END = re.compile(rf"</(?P<tag>{TAG})\s*>\s*\Z")


def _opening(tag: str) -> re.Pattern[str]:
    return re.compile(rf"<{re.escape(tag)}(?:\s[^<>]*)?>")


def _trailing_start(text: str) -> int | None:
    """Where the text's trailing block starts (an element whose opening tag starts a
    line and whose closing tag ends the text), or None when it has none."""
    closing = _CLOSING_AT_END.search(text)
    if closing is None:
        return None
    openings = list(_opening(closing.group("tag")).finditer(text, 0, closing.start()))
    if not openings:
        return None
    start = openings[-1].start()
    line_start = text.rfind("\n", 0, start) + 1
    return start if not text[line_start:start].strip() else None


def strip_blocks(text: str) -> str:
    """``text`` without its leading and trailing blocks (see the module docstring),
    stripped of surrounding white space; ``""`` when it is nothing but blocks. At most
    :data:`MAX_BLOCKS` blocks go from each end."""
    for _ in range(MAX_BLOCKS):
        if (leading := _LEADING.match(text)) is None:
            break
        text = text[leading.end():]
    for _ in range(MAX_BLOCKS):
        if (start := _trailing_start(text)) is None:
            break
        text = text[:start]
    return text.strip()

