"""What a turn's tool block starts from: the conversation's own block, or its agent's (the
block the upstream last prefilled for the agent's model, system prompt and catalogue,
kept in the state store with the conversation that sent it). No I/O of its own: the
agent's record is read through the ``load_agent`` it is given.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from selection.choosing.prefix import block_signature
from selection.choosing.state import ConversationState


def agent_block(state: ConversationState, holder: str) -> ConversationState:
    """The agent's record after a request of conversation ``holder``: the forwarded tools
    and the meta-tool's tier and place, as the upstream last prefilled them; what the
    agent's next conversation starts from."""
    return ConversationState(
        state.copy().loaded, tier=list(state.tier), holder=holder, meta_at=state.meta_at
    )


def shared_block(record: ConversationState, state: ConversationState) -> ConversationState:
    """A conversation's state on the agent's block (``record``): its tools first (the
    meta-tool where the record has it), then the conversation's own tools it lacks;
    counters, history, the tools its searches found and what it delivered in its own
    messages from the conversation."""
    loaded = record.copy().loaded
    own = state.copy()
    for name, times in own.loaded.items():
        loaded.setdefault(name, times)
    return ConversationState(
        loaded, state.turn, state.meta_calls, list(record.tier), state.history_tokens,
        meta_at=record.meta_at, found=own.found, delivered=own.delivered,
        exchanges=own.exchanges, seen=own.seen,
    )


@dataclass(frozen=True)
class BlockStart:
    """What a turn's tool block starts from (``state``), and what the upstream's cache
    holds of it: the block signature (None: nothing of this agent) followed by
    ``cached_history`` tokens of this conversation's messages. ``kind``: None (the
    conversation's own block), ``"adopted"`` (a new conversation on its agent's block) or
    ``"shared"`` (a later turn on the agent's block, after another conversation's turn).
    """

    state: ConversationState
    cached: list[str] | None
    cached_history: int
    kind: str | None


async def start_block(
    state: ConversationState,
    conversation: str,
    *,
    shared: bool,
    load_agent: Callable[[], Awaitable[ConversationState]],
) -> BlockStart:
    """What this turn's block starts from. A new conversation starts from its agent's
    block (the upstream prefilled it last). A later turn keeps its own block, unless
    conversations share the agent's (``shared``: the upstream keeps one prompt per agent,
    ``prefix_cache`` ``last_prompt``) and another conversation's request used it since:
    the upstream then holds that request's prompt and evaluates this conversation's
    history again whatever is forwarded, so the turn takes the agent's block and only
    appends to it.

    ``state``: the conversation's stored state; ``conversation``: its state key;
    ``load_agent``: reads the agent's record (an empty state when unknown), only when the
    turn needs it. Raises what ``load_agent`` raises (StateStoreError).
    """
    own = BlockStart(
        state, block_signature(state.loaded, state.tier, state.meta_at), state.history_tokens, None
    )
    if state.turn and not shared:
        return own
    record = await load_agent()
    if not record.loaded:
        return own if state.turn else BlockStart(state, None, 0, None)
    cached = block_signature(record.loaded, record.tier, record.meta_at)
    if not state.turn:
        adopted = ConversationState(
            record.copy().loaded, tier=list(record.tier), meta_at=record.meta_at
        )
        return BlockStart(adopted, cached, 0, "adopted")
    if record.holder in (None, conversation):
        return own
    return BlockStart(shared_block(record, state), cached, 0, "shared")
