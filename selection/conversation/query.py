"""The retrieval query: what the conversation needs now, as one text.

The last ``user_messages`` user messages plus the tool results that follow the last
assistant message (after a tool result the signal is often in the result), in
conversation order, trailing ``max_chars`` characters. A last user message that is a
fragment (fewer than :data:`MIN_PART_WORDS` words: "Thanks.", "yes", "go on") says little
of what is needed, so the user message before it comes in too. Assistant prose is left out, and
so are the blocks a client writes beside the user's words (``<system-reminder>``,
``<environment_context>``…, :mod:`selection.conversation.injected`): a content part that is one, a
leading or trailing one, a user message of nothing else. When no user message has words of
its own, the query is made of them as they came (never emptied).
Message shapes follow OpenAI's Chat Completions API (``content`` a string or a list of
parts; text parts are ``{"type": "text", "text": ...}``).

:func:`query_parts` adds the query's parts — the sentences of its user messages and each
trailing tool result — so that a tool can be scored by its best part: one vector for a
request that asks for several things lands among the tools of its dominant intent
(docs/measured.md, "Thresholds and the query").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from selection.conversation.injected import strip_blocks

#: Where a user message is split into parts: after a sentence end (``. ! ? ;``), at line
#: breaks, and before a connective that starts another request.
_SPLIT = re.compile(
    r"(?<=[.!?;])\s+|\n+|(?<!\band)\s+(?=(?:and then|then|also|finally|lastly|next|after that|"
    r"additionally)\b)",
    re.IGNORECASE,
)

#: Parts of fewer words are fragments ("Thanks.", "then"), not requests: dropped.
MIN_PART_WORDS = 3


def is_fragment(text: str) -> bool:
    """Whether ``text`` has fewer than :data:`MIN_PART_WORDS` words (whitespace-split)."""
    return len(text.split()) < MIN_PART_WORDS


def content_text(content: Any) -> str:
    """The text of a message's ``content``: a string, or the text parts of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            part.get("text", "")
            for part in content
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        ]
        return "\n".join(texts)
    return ""


def own_text(content: Any) -> str:
    """The text of ``content`` without the blocks a client injected: each text part
    stripped of them (:func:`selection.conversation.injected.strip_blocks`), parts left empty dropped,
    then the joined text stripped again; ``""`` when nothing else is there."""
    if isinstance(content, list):
        parts = [strip_blocks(content_text([part])) for part in content]
        content = "\n".join(part for part in parts if part)
    return strip_blocks(content_text(content))


def _query_texts(messages: Sequence[Any], user_messages: int) -> list[tuple[bool, str]]:
    """``(is_user, text)`` of what the query is made of, in conversation order: the last
    ``user_messages`` user messages with words of their own (:func:`own_text`; all of them
    as they came when none has; one more when the last is a fragment), then the trailing tool results (injected blocks off, unless
    that empties one; a user message of blocks only after them does not end them); blank
    texts left out."""
    def newest_first() -> Iterator[Mapping[str, Any]]:  # read lazily: most stop early
        return (m for m in reversed(messages) if isinstance(m, Mapping))

    trailing_results: list[str] = []
    for message in newest_first():
        if message.get("role") in ("tool", "function"):
            result = own_text(message.get("content"))
            trailing_results.append(result or content_text(message.get("content")))
        elif message.get("role") != "user" or own_text(message.get("content")):
            break  # (a user message of injected blocks only, after the results, is not a turn)
    trailing_results.reverse()
    users = _last_user_texts(newest_first(), user_messages + 1)
    if not users:
        users = [content_text(m.get("content")) for m in messages
                 if isinstance(m, Mapping) and m.get("role") == "user"]
    count = user_messages
    if users and is_fragment(users[-1]):
        count += 1  # a fragment: what it answers or thanks for is in the message before
    texts = [(True, text) for text in users[-count:]]
    texts += [(False, text) for text in trailing_results]
    return [(is_user, text) for is_user, text in texts if text.strip()]


def _last_user_texts(newest_first: Iterable[Mapping[str, Any]], wanted: int) -> list[str]:
    """The own texts (:func:`own_text`) of the last ``wanted`` user messages that have
    one, in conversation order: read from the newest back, so a long history's earlier
    messages are not read."""
    texts: list[str] = []
    for message in newest_first:
        if message.get("role") == "user" and (text := own_text(message.get("content"))):
            texts.append(text)
            if len(texts) == wanted:
                break
    texts.reverse()
    return texts


def build_query(messages: Sequence[Any], user_messages: int = 2, max_chars: int = 4000) -> str:
    """The query text for ``messages`` (empty when there is nothing to search with)."""
    texts = [text for _, text in _query_texts(messages, user_messages)]
    return "\n".join(texts)[-max_chars:] if max_chars > 0 else ""


def split_sentences(text: str) -> list[str]:
    """The parts of one user message: its sentences and lines, also cut before "then",
    "also", "finally", "next"…; stripped, parts under :data:`MIN_PART_WORDS` words dropped."""
    parts = (part.strip() for part in _SPLIT.split(text) if part)
    return [part for part in parts if not is_fragment(part)]


def query_parts(
    messages: Sequence[Any], user_messages: int = 2, max_chars: int = 4000, max_parts: int = 6
) -> list[str]:
    """What to embed for ``messages``: the query (:func:`build_query`) first, then at most
    ``max_parts`` of its parts — the sentences of its user messages (:func:`split_sentences`)
    and each trailing tool result whole — the newest kept, in conversation order.

    Parts come from the query's own trailing ``max_chars`` characters (a part cut by that
    window keeps its tail if still long enough), so they add at most ``max_chars``
    characters; a part equal to the query, or to an earlier part, is left out. Empty when
    the query is; ``[query]`` alone when ``max_parts`` is 0 or the query has one part.
    """
    query = build_query(messages, user_messages, max_chars)
    if not query or max_parts <= 0:
        return [query] if query else []
    parts: list[str] = []
    budget = max_chars
    for is_user, text in reversed(_query_texts(messages, user_messages)):
        if budget <= 0 or len(parts) >= max_parts:
            break
        window = text[-budget:]
        budget -= len(text) + 1  # the newline build_query joins with
        pieces = split_sentences(window) if is_user else [window.strip()]
        for piece in reversed(pieces):
            if not is_fragment(piece) and len(parts) < max_parts:
                parts.append(piece)
    unique: list[str] = []
    for part in reversed(parts):
        if part != query and part not in unique:
            unique.append(part)
    return [query, *unique]
