"""The prefix-cache cost model: what ``select`` admits on a conversation's later turns
and under a token cap (pure, hand-made scores), selection/choosing/prefix.py's agent key, token
cap and cache expectation, and the planner's agent blocks (a new conversation of the
same agent starts from the block the upstream last prefilled)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from config.settings import Settings
from proxy.metrics import Metrics
from proxy.state.store import MemoryStateStore
from proxy.turn.planner import Planner
from selection.catalog.catalog import Catalog, parse_tools
from selection.catalog.policy import CandidatePolicy, Policy
from selection.catalog.tokens import (
    BYTES_PER_TOKEN,
    SEARCH_TOOLS_TOKENS,
    catalog_tokens,
    expected_saving,
    meta_reserve_tokens,
    tool_tokens,
)
from selection.choosing.blocks import shared_block
from selection.choosing.prefix import (
    META_MARK,
    TEMPLATE_RESERVE_TOKENS,
    block_signature,
    estimated_text_tokens,
    expect_cache,
    prefix_key,
    served_entries,
    split_system,
    tool_token_cap,
)
from selection.choosing.selector import TurnFacts, select
from selection.choosing.state import ConversationState, LoadedTool
from selection.choosing.turn_scores import TurnScores
from selection.choosing.wanted import block_serves
from selection.planning import Selector, SelectorSettings
from selection.planning_costs import token_cap
from tests.support.chat_planning import ChatPlanner
from tests.support.selection import ranked
from tests.unit.test_evaluation import KeywordEmbedder, engine


def catalog_of(*names: str) -> Catalog:
    return parse_tools(
        [{"type": "function", "function": {"name": n, "description": f"The {n} tool."}} for n in names]
    )


def scores_for(catalog: Catalog, **by_name: float) -> np.ndarray:
    values = np.zeros(len(catalog), dtype=np.float32)
    for name, score in by_name.items():
        values[catalog.names.index(name)] = score
    return values


#: Count budget (exactly top-k candidates), no tier, no dependencies: admissions are
#: plain to read.
PLAIN = CandidatePolicy(budget="count", tier_size=0)
POLICY = Policy(top_k=2, threshold=0.5, max_tools=16, candidates=PLAIN, refresh_rank=1, refresh_top_k=3)
#: Every tool costs 100 tokens (the upstream's exact count, keyed by fingerprint).
COST = 100


def later(state: ConversationState) -> ConversationState:
    """The state the planner stores after an acting request (turn counted)."""
    after = state.copy()
    after.turn += 1
    return after


# --------------------------------------------------------------------------- later turns


def test_a_later_turn_the_block_serves_changes_nothing() -> None:
    catalog = catalog_of("a", "b", "c", "d", "e")
    first = select(catalog, ranked(scores_for(catalog, a=0.9, b=0.8, c=0.7)), POLICY, ConversationState(), TurnFacts(now=1))
    assert first.names == ["a", "b"]
    # b is the turn's best tool, and forwarded: c (0.7) is a candidate but not admitted.
    second = select(catalog, ranked(scores_for(catalog, b=0.9, c=0.7)), POLICY, later(first.state), TurnFacts(now=2))
    assert second.names == ["a", "b"] and not second.changed


def test_a_later_turn_whose_best_tool_is_missing_admits_at_the_end() -> None:
    catalog = catalog_of("a", "b", "c", "d", "e")
    first = select(catalog, ranked(scores_for(catalog, a=0.9, b=0.8)), POLICY, ConversationState(), TurnFacts(now=1))
    # d is the best now and not forwarded: the block changes, and d is appended after it
    # (its prefix, and so the upstream's KV cache of it, stays). The turn's next
    # candidates, up to refresh_top_k (3), come only as insurance against another change:
    # their schemas cost at most refresh_share (4) × the history's tokens.
    scores = scores_for(catalog, d=0.95, e=0.9, c=0.85, a=0.6)
    short = select(catalog, ranked(scores), POLICY, later(first.state), TurnFacts(now=2, history_tokens=0))
    assert short.names == ["a", "b", "d"] and short.admitted == ("d",) and short.changed
    cost = tool_tokens(catalog.get("e"))  # type: ignore[arg-type]
    one = select(catalog, ranked(scores), POLICY, later(first.state), TurnFacts(now=2, history_tokens=cost // 4))
    assert one.names == ["a", "b", "d", "e"]
    long = select(catalog, ranked(scores), POLICY, later(first.state), TurnFacts(now=2, history_tokens=cost))
    assert long.names == ["a", "b", "d", "e", "c"]


def test_a_tool_called_in_the_history_that_is_not_forwarded_refreshes_the_turn() -> None:
    catalog = catalog_of("a", "b", "c", "d", "e")
    first = select(catalog, ranked(scores_for(catalog, a=0.9, b=0.8)), POLICY, ConversationState(), TurnFacts(now=1))
    # a is still the best (the block serves the query), but e was called: the block
    # changes anyway, so the turn's candidates come too.
    second = select(catalog, ranked(scores_for(catalog, a=0.9, c=0.8)), POLICY, later(first.state), TurnFacts(now=2, pinned=["e"], history_tokens=10_000))
    assert second.names == ["a", "b", "e", "c"]
    # Without history to insure, only the called tool comes.
    bare = select(catalog, ranked(scores_for(catalog, a=0.9, c=0.8)), POLICY, later(first.state), TurnFacts(now=2, pinned=["e"]))
    assert bare.names == ["a", "b", "e"]


def test_refresh_rank_zero_admits_only_what_the_history_needs() -> None:
    catalog = catalog_of("a", "b", "c")
    policy = Policy(top_k=2, threshold=0.5, candidates=PLAIN, refresh_rank=0)
    first = select(catalog, ranked(scores_for(catalog, a=0.9)), policy, ConversationState(), TurnFacts(now=1))
    second = select(catalog, ranked(scores_for(catalog, c=0.99)), policy, later(first.state), TurnFacts(now=2))
    assert second.names == ["a"] and not second.changed


def test_the_meta_tool_keeps_its_tier_and_place_while_the_block_grows() -> None:
    catalog = catalog_of("a", "b", "c", "d", "e", "f")
    tiered = Policy(
        top_k=1, threshold=0.5, refresh_rank=1,
        candidates=CandidatePolicy(budget="count", tier_size=2),
    )
    first = select(catalog, ranked(scores_for(catalog, a=0.9, b=0.8, c=0.7)), tiered, ConversationState(), TurnFacts(now=1))
    assert first.names == ["a"] and first.tier == ("b", "c") and first.state.meta_at == 1
    # Other tools follow a now, but the block serves the turn: nothing changes.
    second = select(catalog, ranked(scores_for(catalog, a=0.9, e=0.8, f=0.7)), tiered, later(first.state), TurnFacts(now=2))
    assert second.tier == ("b", "c") and not second.changed
    # The block grows: f comes after the meta-tool, whose text (the tier line) and place
    # stay byte-identical in the upstream's cache. A tier tool admitted stays listed.
    third = select(catalog, ranked(scores_for(catalog, f=0.95, b=0.8, d=0.7)), tiered, later(second.state), TurnFacts(now=3, history_tokens=10_000))
    assert third.changed and third.names[:2] == ["a", "f"] and "b" in third.names
    assert third.tier == ("b", "c") and third.state.meta_at == 1


def test_an_evicted_tool_before_the_meta_tool_moves_it_up() -> None:
    catalog = catalog_of("a", "b", "c", "d")
    costs = {tool.fingerprint: COST for tool in catalog.tools}
    wide = Policy(top_k=2, threshold=0.5, candidates=PLAIN, refresh_rank=1, refresh_top_k=2)
    first = select(catalog, ranked(scores_for(catalog, a=0.9, b=0.8)), wide, ConversationState(), TurnFacts(now=1, token_cap=2 * COST, exact=costs))
    assert first.names == ["a", "b"] and first.state.meta_at == 2
    # c is needed and the cap holds two tools: b (least recently used) goes, c follows the
    # meta-tool, which now comes after a alone.
    second = select(catalog, ranked(scores_for(catalog, c=0.9, a=0.85)), wide, later(first.state), TurnFacts(now=2, token_cap=2 * COST, exact=costs))
    assert second.names == ["a", "c"] and second.evicted == ("b",) and second.state.meta_at == 1


def test_a_new_block_puts_the_meta_tool_after_its_tools() -> None:
    catalog = catalog_of("a", "b", "c")
    state = ConversationState({"a": LoadedTool(1.0, 1.0)}, turn=1)  # no meta-tool forwarded
    grown = select(catalog, ranked(scores_for(catalog, c=0.9)), POLICY, state, TurnFacts(now=2))
    assert grown.names == ["a", "c"] and grown.state.meta_at == 2


def test_block_serves_reads_the_best_scored_tools_in_catalogue_order_on_ties() -> None:
    score_of = TurnScores(catalog_of("a", "b", "c"), np.asarray([0.5, 0.9, 0.9], np.float32))
    assert block_serves(score_of, {"b", "c"}, 2)
    assert not block_serves(score_of, {"b"}, 2)
    assert block_serves(score_of, {"b"}, 1)
    assert block_serves(score_of, set(), 0)


# --------------------------------------------------------------------------- token cap


def test_the_token_cap_bounds_what_is_forwarded() -> None:
    catalog = catalog_of("a", "b", "c", "d")
    costs = {tool.fingerprint: COST for tool in catalog.tools}
    wide = Policy(top_k=4, threshold=0.5, candidates=PLAIN)
    chosen = select(catalog, ranked(scores_for(catalog, a=0.9, b=0.8, c=0.7)), wide, ConversationState(), TurnFacts(now=1, token_cap=2 * COST, exact=costs))
    assert chosen.names == ["a", "b"]


def test_a_pinned_tool_passes_the_token_cap_and_evicts_others() -> None:
    catalog = catalog_of("a", "b", "c")
    costs = {tool.fingerprint: COST for tool in catalog.tools}
    wide = Policy(top_k=4, threshold=0.5, candidates=PLAIN)
    first = select(catalog, ranked(scores_for(catalog, a=0.9, b=0.8)), wide, ConversationState(), TurnFacts(now=1, token_cap=2 * COST, exact=costs))
    # The context shrank (a longer history): the cap now holds one tool.
    second = select(catalog, ranked(scores_for(catalog, a=0.9, b=0.8)), wide, later(first.state), TurnFacts(now=2, pinned=["c"], token_cap=COST, exact=costs))
    assert second.names == ["a", "c"] and second.evicted == ("b",)


# --------------------------------------------------------------------------- prefix.py


def entry_cost(entry: str) -> int:
    """A tool costs COST tokens, the meta-tool's entry 30."""
    return 30 if entry.startswith(META_MARK) else COST


def meta_last(*names: str) -> list[str]:
    """The signature of a block of ``names`` with the meta-tool (no tier) after them."""
    return block_signature(names, [], len(names))


def test_expectation_of_an_unchanged_block_is_the_new_messages() -> None:
    block = meta_last("a", "b")
    expectation = expect_cache(
        block, block, entry_cost, head_tokens=50,
        cached_history_tokens=400, history_tokens=480,
    )
    assert expectation.evaluated == 80 and expectation.reused == 50 + 200 + 30 + 400
    assert not expectation.broken


def test_expectation_of_an_appended_tool_re_evaluates_the_history() -> None:
    expectation = expect_cache(
        meta_last("a", "b"), meta_last("a", "b", "c"), entry_cost, head_tokens=50,
        cached_history_tokens=400, history_tokens=480,
    )
    assert expectation.reused == 50 + 200
    assert expectation.evaluated == COST + 30 + 480 and expectation.broken


def test_expectation_of_a_changed_tier_breaks_at_the_meta_tool() -> None:
    old = block_signature(["a", "b"], ["x", "y"], 1)
    new = block_signature(["a", "b"], ["x", "z"], 1)
    assert old[0] == new[0] == "a" and old[1].startswith(META_MARK) and old[1] != new[1]
    expectation = expect_cache(
        old, new, entry_cost, head_tokens=50,
        cached_history_tokens=400, history_tokens=480,
    )
    assert expectation.reused == 50 + COST and expectation.evaluated == 30 + COST + 480


def test_a_tool_admitted_after_the_meta_tool_keeps_it_cached() -> None:
    old = block_signature(["a"], ["x"], 1)
    new = block_signature(["a", "b"], ["x"], 1)
    assert block_signature(["a", "b"], ["x"], None) == ["a", "b"]
    expectation = expect_cache(
        old, new, entry_cost, head_tokens=50,
        cached_history_tokens=400, history_tokens=480,
    )
    assert expectation.reused == 50 + COST + 30 and expectation.evaluated == COST + 480


def test_with_chunk_reuse_a_block_that_only_lost_tools_is_served_whole() -> None:
    expectation = expect_cache(
        meta_last("a", "b", "c"), meta_last("a", "c"), entry_cost, head_tokens=50,
        cached_history_tokens=400, history_tokens=480, reuse=True,
    )
    assert expectation.evaluated == 80 and not expectation.broken
    # Without chunk reuse the cache ends where "b" was.
    plain = expect_cache(
        meta_last("a", "b", "c"), meta_last("a", "c"), entry_cost, head_tokens=50,
        cached_history_tokens=400, history_tokens=480,
    )
    assert plain.reused == 50 + COST and plain.broken


def test_with_chunk_reuse_an_inserted_tool_still_ends_the_match() -> None:
    assert served_entries(["a", "b", "c"], ["a", "c", "d", "b"], reuse=True) == 2
    assert served_entries(["a", "b", "c"], ["a", "c", "d", "b"], reuse=False) == 1
    assert served_entries(["a", "b"], ["x", "a", "b"], reuse=True) == 0
    expectation = expect_cache(
        meta_last("a", "b", "c"), meta_last("a", "c", "d"), entry_cost, head_tokens=50,
        cached_history_tokens=400, history_tokens=480, reuse=True,
    )
    assert expectation.reused == 50 + 2 * COST and expectation.broken


def test_expectation_without_a_cached_block_evaluates_everything() -> None:
    expectation = expect_cache(
        None, meta_last("a"), entry_cost, head_tokens=50,
        cached_history_tokens=0, history_tokens=20,
    )
    assert expectation.reused == 0 and expectation.evaluated == 200 and not expectation.broken


def test_token_cap_is_a_share_of_the_context_that_leaves_room_for_the_rest() -> None:
    assert tool_token_cap(None, 0.5, 100) is None
    assert tool_token_cap(8192, 0.5, 1000) == 4096
    assert tool_token_cap(8192, 0.5, 6000) == 8192 - 6000 - TEMPLATE_RESERVE_TOKENS
    assert tool_token_cap(8192, 0.5, 9000) == 0


def test_split_system_and_the_agent_key() -> None:
    messages = [
        {"role": "system", "content": "You are a helper."},
        {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "content": "hi"},
        {"role": "system", "content": "late system message: part of the conversation"},
    ]
    system, rest = split_system(messages)
    assert "You are a helper." in system and "Be brief." in system
    assert rest == messages[2:]
    key = prefix_key("m", system, "f" * 64)
    assert key.startswith("agent:") and "helper" not in key
    assert key != prefix_key("other-model", system, "f" * 64)
    assert key != prefix_key("m", system + "!", "f" * 64)


def test_meta_reserve_grows_with_the_names_and_the_tier() -> None:
    ten = catalog_of(*(f"tool_{i:025d}" for i in range(10)))
    twenty = catalog_of(*(f"tool_{i:025d}" for i in range(20)))
    assert meta_reserve_tokens(ten, 0) < meta_reserve_tokens(twenty, 0)
    assert meta_reserve_tokens(ten, 0) == math.ceil(10 * (30 + 3) / BYTES_PER_TOKEN)
    assert meta_reserve_tokens(catalog_of(), 8) == 200


def test_a_search_function_reserves_room_for_its_groups_not_every_tool_name() -> None:
    """``search_tools`` (a catalogue too large to list) names no tool: a catalogue of
    20,000 tools still leaves its tools room in a 65,536-token context, where the
    ``load_tools`` enum of every name alone would take more than the context."""
    many = catalog_of(*(f"fetch_item_number_{i}" for i in range(20_000)))
    assert meta_reserve_tokens(many, 0) > 65_536
    searched = meta_reserve_tokens(many, 8, [])
    assert searched == SEARCH_TOOLS_TOKENS + 200
    assert meta_reserve_tokens(many, 8, ["github", "playwright"]) == searched + math.ceil(
        len("github; playwright; ") / BYTES_PER_TOKEN)
    policy = Policy()
    assert token_cap(many, policy, 0.5, 65_536, 1_000) == 0
    assert token_cap(many, policy, 0.5, 65_536, 1_000, search=True) == 32_768


# --------------------------------------------------------------------------- the planner


CATALOG_NAMES = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]


def body(text: str, system: str = "You are the agent.", model: str = "m") -> dict:
    return {
        "model": model,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": text}],
        "tools": [
            {"type": "function", "function": {"name": n, "description": f"The {n} tool."}}
            for n in CATALOG_NAMES
        ],
    }


def planner(store: MemoryStateStore | None = None, **settings: object) -> ChatPlanner:
    clock = iter(range(1, 10_000))
    policy = Policy(top_k=2, threshold=0.1, max_tools=4, candidates=PLAIN, refresh_rank=1, refresh_top_k=2)
    selector = Selector(engine(), policy, SelectorSettings(query_user_messages=1),
                        clock=lambda: float(next(clock)))
    return ChatPlanner(Planner(
        settings=Settings(query_user_messages=1, **settings), selector=selector,
        store=store or MemoryStateStore(3600, 100), metrics=Metrics(),
        on_late_error=lambda error: None,
    ))


def headers(conversation: str, key: str = "k1") -> list[tuple[bytes, bytes]]:
    return [(b"x-conversation-id", conversation.encode()), (b"authorization", f"Bearer {key}".encode())]


async def test_a_new_conversation_of_the_same_agent_starts_from_its_last_block() -> None:
    assert KeywordEmbedder  # the planner's engine embeds by keywords: "alpha" → alpha
    plans = planner()
    first = await plans.plan(body("alpha beta please"), headers("A"))
    assert first.plan.selection.names == ["alpha", "beta"] and first.plan.block_start is None
    assert first.plan.expectation is not None and first.plan.expectation.reused == 0
    second = await plans.plan(body("gamma"), headers("B"))
    # B's block is A's with B's needs appended: the upstream reuses the whole old block.
    assert second.plan.selection.names[:2] == ["alpha", "beta"] and "gamma" in second.plan.selection.names
    assert second.plan.block_start == "adopted"
    assert second.plan.expectation is not None and second.plan.expectation.reused > 0
    # Another agent (other system prompt) or another credential starts afresh.
    other = await plans.plan(body("gamma", system="Another agent."), headers("C"))
    assert other.plan.selection.names[0] == "gamma" and other.plan.block_start is None
    stranger = await plans.plan(body("gamma"), headers("D", key="k2"))
    assert stranger.plan.selection.names[0] == "gamma" and stranger.plan.block_start is None


async def test_an_agent_block_at_its_cap_is_adopted_with_its_least_recently_used_evicted() -> None:
    plans = planner()
    await plans.plan(body("alpha beta"), headers("A"))
    await plans.plan(body("gamma delta"), headers("B"))  # adopted: 4 tools, the cap
    third = await plans.plan(body("epsilon zeta"), headers("C"))
    # C's best tool (epsilon), and its next top-k candidate (zeta: insurance its history
    # pays for), make room: what leaves is what the agent used least recently, the
    # latest of it first (with llama-server's --cache-reuse, removing a tool costs no
    # re-evaluation after it).
    assert third.plan.block_start == "adopted"
    assert third.plan.selection.names == ["gamma", "delta", "epsilon", "zeta"]
    assert third.plan.selection.evicted == ("beta", "alpha")


async def test_a_later_turn_at_the_cap_evicts_the_least_recently_used_tool() -> None:
    plans = planner()
    await plans.plan(body("alpha beta"), headers("A"))
    second = await plans.plan(body("gamma delta"), headers("A"))
    assert second.plan.selection.names == ["alpha", "beta", "gamma", "delta"]
    third = await plans.plan(body("epsilon"), headers("A"))
    assert third.plan.selection.evicted == ("beta",)  # of the two used least recently, the latest
    assert third.plan.selection.names[-1] == "epsilon"


def test_refresh_candidates_beyond_top_k_only_fill_free_room() -> None:
    catalog = catalog_of("a", "b", "c", "d", "e", "f")
    capped = Policy(top_k=1, threshold=0.5, max_tools=3, candidates=PLAIN, refresh_rank=1, refresh_top_k=4)
    first = select(catalog, ranked(scores_for(catalog, a=0.9)), capped, ConversationState(), TurnFacts(now=1))
    second = select(catalog, ranked(scores_for(catalog, d=0.99, e=0.9, f=0.8, b=0.7)), capped, later(first.state), TurnFacts(now=2, history_tokens=10_000))
    # d (within top-k) is admitted; e fills the last free place; f and b would evict: not.
    assert second.names == ["a", "d", "e"] and second.evicted == ()
    # With top-k 2, e is among the turn's top-k: at the cap it evicts the least recently
    # used tool (a) instead; f, beyond top-k, still only fills free room.
    wider = Policy(top_k=2, threshold=0.5, max_tools=2, candidates=PLAIN, refresh_rank=1, refresh_top_k=4)
    base = select(catalog, ranked(scores_for(catalog, a=0.9, b=0.8)), wider, ConversationState(), TurnFacts(now=1))
    third = select(catalog, ranked(scores_for(catalog, d=0.99, e=0.9, f=0.8)), wider, later(base.state), TurnFacts(now=2, history_tokens=10_000))
    assert third.names == ["d", "e"] and third.evicted == ("b", "a")


@pytest.mark.parametrize("context", [None, 3500])
async def test_the_token_cap_follows_the_configured_context(context: int | None) -> None:
    plans = planner(context_tokens=context)
    long_history = "x" * 12_000 + " alpha beta"
    turn = await plans.plan(body(long_history), headers("A"))
    if context is None:
        assert len(turn.plan.selection.names) == 2
    else:  # ~3,400 tokens of messages leave no room for tools in 3,500
        assert turn.plan.selection.names == []


def follow_up(first: dict, reply: str, text: str) -> dict:
    """``first`` with the assistant's ``reply`` and a new user message."""
    later = dict(first)
    later["messages"] = [
        *first["messages"], {"role": "assistant", "content": reply}, {"role": "user", "content": text}
    ]
    return later


async def test_with_one_cached_prompt_per_agent_a_turn_after_another_conversation_takes_its_block() -> None:
    plans = planner(prefix_cache="last_prompt")
    a1 = body("alpha beta please")
    await plans.plan(a1, headers("A"))
    b1 = await plans.plan(body("gamma"), headers("B"))
    assert b1.plan.selection.names == ["alpha", "beta", "gamma"]
    # The upstream now holds B's prompt: A's history is evaluated again whatever A sends,
    # so A takes the block the upstream holds instead of breaking it after "beta".
    a2 = await plans.plan(follow_up(a1, "Done.", "alpha again"), headers("A"))
    assert a2.plan.block_start == "shared"
    assert a2.plan.selection.names == ["alpha", "beta", "gamma"] and not a2.plan.selection.admitted
    assert a2.plan.expectation is not None and not a2.plan.expectation.broken
    history = estimated_text_tokens(follow_up(a1, "Done.", "alpha again")["messages"][1:])
    assert a2.plan.expectation.evaluated == history
    # A again, right after its own turn: its own block and cached history.
    a3 = await plans.plan(
        follow_up(follow_up(a1, "Done.", "alpha again"), "Done.", "beta"), headers("A")
    )
    assert a3.plan.block_start is None and a3.plan.selection.names == ["alpha", "beta", "gamma"]
    assert a3.plan.expectation is not None and a3.plan.expectation.evaluated < history


async def test_with_a_cache_per_conversation_a_later_turn_keeps_its_own_block() -> None:
    plans = planner(prefix_cache="per_conversation")
    a1 = body("alpha beta please")
    await plans.plan(a1, headers("A"))
    await plans.plan(body("gamma"), headers("B"))
    a2 = await plans.plan(follow_up(a1, "Done.", "alpha again"), headers("A"))
    assert a2.plan.block_start is None and a2.plan.selection.names == ["alpha", "beta"]
    assert a2.plan.expectation is not None and a2.plan.expectation.evaluated < estimated_text_tokens(
        follow_up(a1, "Done.", "alpha again")["messages"][1:]
    )


def test_a_shared_block_keeps_the_agents_order_and_appends_the_conversations_own() -> None:
    record = ConversationState(
        {n: LoadedTool(1.0, 1.0) for n in ("alpha", "beta", "gamma")}, tier=["delta"], holder="B",
        meta_at=2,
    )
    own = ConversationState({n: LoadedTool(2.0, 3.0) for n in ("beta", "eta")}, 4, 1, ["x"], 90)
    merged = shared_block(record, own)
    assert list(merged.loaded) == ["alpha", "beta", "gamma", "eta"]
    assert merged.loaded["eta"] == LoadedTool(2.0, 3.0)
    assert (merged.turn, merged.meta_calls, merged.tier, merged.history_tokens) == (4, 1, ["delta"], 90)
    assert merged.holder is None
    assert merged.meta_at == 2  # the meta-tool where the agent's block has it: after beta


def described(count: int, words: int) -> Catalog:
    """``count`` tools whose descriptions are ``words`` words long."""
    return parse_tools([
        {"type": "function", "function": {"name": f"tool_{i}", "description": "word " * words}}
        for i in range(count)
    ])


def test_expected_saving_prices_top_k_mean_tools_and_the_meta_tool() -> None:
    large = described(40, 300)
    pruned = 8 * catalog_tokens(large) / 40 + meta_reserve_tokens(large, 8)
    assert expected_saving(large, 8, 8) == pytest.approx(1 - pruned / catalog_tokens(large))
    assert expected_saving(large, 8, 8) > 0.7  # eight of forty large tools: worth pruning
    assert expected_saving(described(12, 1), 8, 8) < 0  # the menu alone outweighs the tools
    assert expected_saving(parse_tools([]), 8, 8) == 0.0


def test_a_catalogue_pruning_would_enlarge_is_forwarded_whole_if_it_fits() -> None:
    policy = Policy(top_k=8, min_catalog_tools=8)  # min_saving 0
    assert policy.forwards_whole(catalog_of(*(f"t{i}" for i in range(8))))  # by count
    tiny, large = described(12, 1), described(40, 300)
    assert policy.forwards_whole(tiny) and not policy.forwards_whole(large)
    # Sent whole it must fit the tool budget; if it does not, pruning is the only way.
    assert policy.forwards_whole(tiny, token_cap=catalog_tokens(tiny))
    assert not policy.forwards_whole(tiny, token_cap=catalog_tokens(tiny) - 1)
    # A higher bar forwards more catalogues whole; -inf prunes whatever it costs.
    saving = expected_saving(large, 8, 8)
    assert Policy(top_k=8, min_saving=saving + 0.01).forwards_whole(large)
    assert not Policy(top_k=8, min_saving=saving).forwards_whole(large)
    assert not Policy(top_k=8, min_saving=-math.inf).forwards_whole(tiny)
    # top-k is the request's (X-Tool-Pruning-Top-K): fewer tools save more.
    assert expected_saving(large, 2, 8) > saving
    assert not Policy(top_k=8, min_saving=saving + 0.01).forwards_whole(large, top_k=2)
