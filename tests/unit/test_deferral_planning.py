"""The deferral contract through the planner (proxy/turn/planner.py), the code every API
shares: the client's CORE forwarded first whatever the catalogue's size, toolprune's
pre-loading switchable, the client's search tool standing in for the meta-tools, its calls
run with their semantics and what they find kept loaded for the conversation. The engine
embeds by keywords (``alpha`` → the alpha tool), so every score is exact."""

from __future__ import annotations

import json
from typing import Any

from config.settings import Settings
from proxy.apis.chat.adapter import ChatRequest
from proxy.metrics import Metrics
from proxy.state.store import MemoryStateStore
from proxy.turn.planner import Planner
from proxy.turn.turn import MetaCall
from selection.catalog.catalog import parse_tools
from selection.catalog.policy import CandidatePolicy, Policy
from selection.clients.tool_search import ClientSearch
from selection.conversation.history import ToolChoice
from selection.plan import TurnInput
from selection.planning import Selector, SelectorSettings
from tests.unit.test_evaluation import NAMES, engine

KEPT = ["alpha", "beta"]
PLAIN = CandidatePolicy(budget="count", tier_size=0)
HEADERS = [(b"x-conversation-id", b"c1")]


def planner(preload: bool = True) -> Planner:
    clock = iter(range(1, 10_000))
    policy = Policy(top_k=2, threshold=0.1, max_tools=4, candidates=PLAIN, preload_deferred=preload)
    selector = Selector(engine(), policy, SelectorSettings(query_user_messages=1),
                        clock=lambda: float(next(clock)))
    return Planner(
        settings=Settings(query_user_messages=1), selector=selector,
        store=MemoryStateStore(3600, 100), metrics=Metrics(), on_late_error=lambda error: None,
    )


def request(text: str, names: list[str] = NAMES, search: ClientSearch | None = None,
            found: tuple[str, ...] = ()) -> TurnInput:
    tools = [
        {"type": "function", "function": {"name": n, "description": f"The {n} tool."},
         **({} if n in KEPT else {"defer_loading": True})}
        for n in names
    ]
    body = {"model": "m", "messages": [{"role": "user", "content": text}], "tools": tools}
    return TurnInput(body, parse_tools(tools), body["messages"], ToolChoice(), search=search,
                     found=found)


async def test_the_client_core_is_forwarded_first_and_the_pool_preloaded_by_ranking() -> None:
    read = request("gamma please")
    turn = await planner().plan(read, HEADERS)
    assert turn.plan.selection.names == ["alpha", "beta", "gamma"]
    assert turn.plan.selection.provenance == {"alpha": "client", "beta": "client", "gamma": "toolprune"}
    assert turn.deferral and turn.plan.meta is not None and turn.plan.meta.load_name == "load_tools"
    # The upstream gets the definitions without defer_loading.
    body = json.loads(ChatRequest(read).upstream_body(turn, with_meta=True))
    assert all("defer_loading" not in tool for tool in body["tools"])
    assert [t["function"]["name"] for t in body["tools"]][:3] == ["alpha", "beta", "gamma"]


async def test_a_small_deferred_catalogue_is_still_planned() -> None:
    turn = await planner().plan(request("delta", names=["alpha", "gamma", "delta"]), HEADERS)
    assert turn.plan.selection.names == ["alpha", "delta"]  # 3 tools: under min_catalog_tools


async def test_preloading_off_forwards_the_client_core_only_until_a_search() -> None:
    plans = planner(preload=False)
    search = ClientSearch("regex", "tool_search_tool_regex")
    turn = await plans.plan(request("gamma please", search=search), HEADERS)
    assert turn.plan.selection.names == ["alpha", "beta"]
    assert turn.plan.meta is not None and turn.plan.meta.names == {"tool_search_tool_regex"}
    call = MetaCall("srvtoolu_1", "tool_search_tool_regex", json.dumps({"query": "^(gamma|zeta)$"}))
    (content,) = await plans.run_meta_calls(turn, [call])
    assert [item["name"] for item in json.loads(content)["found"]] == ["gamma", "zeta"]
    assert turn.searches["srvtoolu_1"].found == ("gamma", "zeta")
    assert turn.plan.selection.names == ["alpha", "beta", "gamma", "zeta"]
    assert set(turn.plan.selection.provenance.values()) == {"client", "search"}
    # The next turn of the conversation keeps them, and says a search found them.
    later = await plans.plan(request("something else", search=search), HEADERS)
    assert later.plan.selection.names == ["alpha", "beta", "gamma", "zeta"]
    assert later.plan.selection.provenance["zeta"] == "search"


async def test_a_bad_pattern_is_answered_to_the_model_and_loads_nothing() -> None:
    plans = planner(preload=False)
    turn = await plans.plan(
        request("x", search=ClientSearch("regex", "tool_search_tool_regex")), HEADERS
    )
    call = MetaCall("srvtoolu_2", "tool_search_tool_regex", json.dumps({"query": "(" * 3}))
    (content,) = await plans.run_meta_calls(turn, [call])
    assert json.loads(content)["error_code"] == "invalid_tool_input"
    assert turn.plan.selection.names == ["alpha", "beta"]


async def test_a_natural_language_search_uses_toolprune_ranking() -> None:
    plans = planner(preload=False)
    turn = await plans.plan(request("x", search=ClientSearch("query", "tool_search")), HEADERS)
    call = MetaCall("c1", "tool_search", json.dumps({"query": "the epsilon tool"}))
    await plans.run_meta_calls(turn, [call])
    assert turn.searches["c1"].found[0] == "epsilon"
    assert "alpha" not in turn.searches["c1"].found  # the client's CORE is not searched


async def test_tools_found_in_the_history_are_loaded() -> None:
    turn = await planner(preload=False).plan(request("x", found=("theta", "nope")), HEADERS)
    assert turn.plan.selection.names == ["alpha", "beta", "theta"]
    assert turn.plan.selection.provenance["theta"] == "search"


async def test_without_deferral_the_plan_is_todays() -> None:
    def plain(text: str) -> TurnInput:
        tools: list[dict[str, Any]] = [
            {"type": "function", "function": {"name": n, "description": f"The {n} tool."}}
            for n in NAMES
        ]
        body = {"model": "m", "messages": [{"role": "user", "content": text}], "tools": tools}
        return TurnInput(body, parse_tools(tools), body["messages"], ToolChoice())

    turn = await planner(preload=False).plan(plain("gamma please"), HEADERS)
    assert turn.plan.selection.names == ["gamma"] and not turn.deferral
    assert set(turn.plan.selection.provenance.values()) == {"toolprune"}
