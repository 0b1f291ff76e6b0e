"""What a turn reads of its whole history, read once per message.

A turn needs, of every message its request brings: whether they continue the
conversation's last request (:mod:`selection.conversation.continuity`), the tools they
called (``tool_calls``, and in text: :func:`selection.catalog.text_path.text_called_tools`),
their size in estimated tokens (after the leading system messages,
:func:`selection.choosing.prefix.estimated_text_tokens`), and the mark the next request is
checked against. All of it is read in one pass, message by message, and each part folds:
the facts of a history are those of its first messages with the rest added.

So a request that continues its conversation reads only its new messages, where its
bytes are known (:class:`~selection.conversation.continuity.RawHistory`): its prefix is
checked by one BLAKE3 pass over the bytes the last request marked, and the facts of that
prefix come from a process-local memo keyed by that hash (the last request left them
there; another worker's or a restarted process's request reads the prefix once). Without
its bytes (another API's request, a rewritten history) every message is read once, as
before. Pure but for the memo; values identical to reading the whole history.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

import blake3

from selection.catalog.catalog import canonical_json
from selection.catalog.text_path import text_call_candidates
from selection.catalog.tokens import BYTES_PER_TOKEN
from selection.conversation.continuity import HistoryMark, RawHistory, add_rendered
from selection.conversation.history import message_calls

#: Prefixes whose facts are kept (one per conversation recently seen; a few KB each).
MEMO_ENTRIES = 4096


@dataclass(frozen=True)
class HistoryFacts:
    """What a request's messages say as a whole: ``continued`` (they hold the history
    the conversation's last request marked, unchanged, at their start), ``mark`` (theirs,
    for the next request), ``called`` (the tools their assistant messages called, first
    call first), ``text_calls`` (the names assistant text may call, first seen first,
    whatever the catalogue) and ``history_tokens`` (estimated prompt tokens of the
    messages after the leading system ones)."""

    continued: bool
    mark: HistoryMark
    called: tuple[str, ...]
    text_calls: tuple[str, ...]
    history_tokens: int

    def text_called(self, names: AbstractSet[str]) -> list[str]:
        """The catalogue's tools (``names``) assistant text called, in order of
        appearance (as :func:`selection.catalog.text_path.text_called_tools`)."""
        return [name for name in self.text_calls if name in names]


@dataclass
class _Folded:
    """The facts of a history's first ``count`` messages, open to more."""

    count: int = 0
    lead: int = 0  # leading system/developer messages
    rendered: Any = field(default_factory=blake3.blake3)
    called: dict[str, None] = field(default_factory=dict)
    text_calls: dict[str, None] = field(default_factory=dict)
    items: int = 0  # messages after the lead
    item_bytes: int = 0  # their canonical JSON bytes

    def copy(self) -> _Folded:
        return _Folded(self.count, self.lead, self.rendered.copy(), dict(self.called),
                       dict(self.text_calls), self.items, self.item_bytes)

    def add(self, messages: Sequence[Any]) -> None:
        for message in messages:
            add_rendered(self.rendered, message)
            self.called.update(dict.fromkeys(message_calls(message)))
            self.text_calls.update(dict.fromkeys(text_call_candidates(message)))
            if self.lead == self.count and isinstance(message, dict) and message.get(
                    "role") in ("system", "developer"):
                self.lead += 1
            else:
                self.items += 1
                self.item_bytes += len(canonical_json(message))
            self.count += 1

    @property
    def history_tokens(self) -> int:
        """Estimated tokens of the messages after the lead, as one JSON array."""
        size = 2 + self.item_bytes + max(self.items - 1, 0)
        return math.ceil(size / BYTES_PER_TOKEN)


_memo: OrderedDict[str, _Folded] = OrderedDict()


def read_history(
    messages: Sequence[Any], raw: RawHistory | None, previous: HistoryMark | None
) -> HistoryFacts:
    """The :class:`HistoryFacts` of ``messages`` (``raw``: their array's bytes, None when
    the adapter has none), against ``previous``, the conversation's last mark (None:
    nothing marked, so not ``continued``)."""
    folded, raw_hasher, continued = None, None, False
    if previous is not None:
        raw_hasher = previous.raw_prefix(raw)
        continued = raw_hasher is not None
        known = _memo.get(previous.raw) if continued and previous.raw is not None else None
        if known is not None and known.count == previous.messages:
            folded = known.copy()
        elif previous.messages <= len(messages):
            folded = _Folded()
            folded.add(messages[: previous.messages])
            continued = continued or folded.rendered.hexdigest(16) == previous.digest
    if folded is None:
        folded = _Folded()
    folded.add(messages[folded.count:])
    mark = HistoryMark(len(messages), folded.rendered.hexdigest(16))
    if raw is not None:
        if raw_hasher is not None and previous is not None and previous.cut is not None:
            raw_hasher.update(raw.data[previous.cut: raw.end])
        else:
            raw_hasher = blake3.blake3(raw.data[: raw.end])
        mark = HistoryMark(mark.messages, mark.digest, raw_hasher.hexdigest(16), raw.end)
        _remember(mark.raw, folded)
    return HistoryFacts(continued, mark, tuple(folded.called), tuple(folded.text_calls),
                        folded.history_tokens)


def _remember(key: Any, folded: _Folded) -> None:
    _memo[key] = folded
    _memo.move_to_end(key)
    while len(_memo) > MEMO_ENTRIES:
        _memo.popitem(last=False)
