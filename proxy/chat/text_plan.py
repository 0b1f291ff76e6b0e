"""A tool block in a system (or developer) message's text: where it is and how the message
is rewritten to keep only the selected entries (the text path)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from selection.text_path import TextFormat, ToolBlock, detect


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


def find_text_plan(
    messages: Sequence[Any], formats: Sequence[TextFormat], min_entries: int
) -> TextPlan | None:
    """The first tool block (with at least ``min_entries`` entries) in a system or
    developer message, or None."""
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping) or message.get("role") not in ("system", "developer"):
            continue
        content = message.get("content")
        texts: list[tuple[int | None, str]] = []
        if isinstance(content, str):
            texts.append((None, content))
        elif isinstance(content, list):
            texts.extend(
                (i, part["text"])
                for i, part in enumerate(content)
                if isinstance(part, Mapping) and isinstance(part.get("text"), str)
            )
        for part, text in texts:
            block = detect(text, formats, min_entries)
            if block is not None:
                return TextPlan(index, part, text, block)
    return None
