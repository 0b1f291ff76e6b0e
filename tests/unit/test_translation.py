"""The translate-only path (proxy/turn/translation.py) and where the decision ladder takes
it (proxy/turn/decisions.py): which requests are translated when not pruned, the turn
they become (every tool, no ``defer_loading``, the client's search kept as the function
the proxy answers, nothing stored), and which decisions keep the client's bytes.

The ladder's edges are faked (the forwarder, the handler's serve): the unit is the
ladder; the wire is tested through the SDKs in tests/integration/test_translate_only.py.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from config.settings import Settings
from proxy.apis.chat.adapter import ChatRequest
from proxy.apis.messages.adapter import MessagesApi
from proxy.apis.responses.adapter import ResponsesApi
from proxy.http.forwarding import ClientRequest
from proxy.http.headers import Headers
from proxy.metrics import Metrics
from proxy.turn.decisions import DecisionFlow
from proxy.turn.translation import whole_turn
from proxy.turn.turn import MetaCall, Turn
from selection.catalog.catalog import parse_tools
from selection.clients.searches import Searches
from selection.clients.tool_search import ClientSearch
from selection.conversation.history import ToolChoice
from selection.errors import EmbedderError, SmallCatalog
from selection.plan import TurnInput
from tests.support.logs import Lines
from tests.unit.test_deferral_planning import HEADERS, planner, request
from tests.unit.test_evaluation import KeywordEmbedder, engine

REGEX = ClientSearch("regex", "tool_search_tool_regex")


def test_a_request_without_deferral_search_or_reshaping_is_not_translated() -> None:
    tools = [{"type": "function", "function": {"name": n}} for n in ("alpha", "beta")]
    body = {"model": "m", "messages": [], "tools": tools}
    plain = TurnInput(body, parse_tools(tools), [], ToolChoice())
    assert whole_turn(planner().selector, plain, HEADERS, "small_catalog", shared=False) is None


def test_the_whole_turn_forwards_every_tool_kept_first_without_defer_loading() -> None:
    read = request("gamma please")
    turn = whole_turn(planner().selector, read, HEADERS, "fallback", shared=False)
    assert turn is not None and turn.whole == "fallback" and turn.decision == "fallback"
    # alpha and beta are the client's CORE; the rest go after them in the client's order.
    assert turn.plan.selection.names[:2] == ["alpha", "beta"]
    assert sorted(turn.plan.selection.names) == sorted(turn.plan.catalog.names)
    assert turn.plan.meta is None  # no search tool: nothing to answer, nothing invented
    body = json.loads(ChatRequest(read).upstream_body(turn, with_meta=True))
    assert "defer_loading" not in json.dumps(body)
    assert [t["function"]["name"] for t in body["tools"]] == turn.plan.selection.names
    assert "n_cache_reuse" not in body and "tool_choice" not in body


def test_the_client_search_stays_offered_unless_tool_choice_forbids_it() -> None:
    read = request("x", search=REGEX)
    turn = whole_turn(planner().selector, read, HEADERS, "dry_run", shared=False)
    assert turn is not None and turn.plan.meta is not None
    assert turn.plan.meta.client_search == "tool_search_tool_regex" and turn.search == REGEX
    body = json.loads(ChatRequest(read).upstream_body(turn, with_meta=True))
    assert body["tools"][-1]["function"]["name"] == "tool_search_tool_regex"
    silenced = request("x", search=REGEX)
    silenced = TurnInput(silenced.body, silenced.native, silenced.messages,
                         ToolChoice(offer_meta=False), search=REGEX)
    quiet = whole_turn(planner().selector, silenced, HEADERS, "dry_run", shared=False)
    assert quiet is not None and quiet.plan.meta is None


async def test_a_search_in_a_whole_turn_is_answered_and_nothing_is_stored() -> None:
    plans = planner()
    turn = whole_turn(planner().selector, request("x", search=REGEX), HEADERS, "fallback", shared=False)
    assert turn is not None
    before = turn.plan.selection
    call = MetaCall("srvtoolu_1", "tool_search_tool_regex", json.dumps({"query": "^gamma$"}))
    (answer,) = await plans.run_meta_calls(turn, [call])
    assert [found["name"] for found in json.loads(answer)["found"]] == ["gamma"]
    assert turn.searches["srvtoolu_1"].found == ("gamma",)
    assert turn.meta_events == [{"tool": "client_search", "loaded": [], "found": ["gamma"],
                                 "error": None}]
    assert turn.plan.selection is before  # every tool is forwarded already
    assert await plans.store.get(turn.conversation) is None


class FailingEmbedder(KeywordEmbedder):
    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        raise EmbedderError("no embedding model")


async def test_a_query_search_ranks_by_bm25_when_the_embedder_fails() -> None:
    turn = whole_turn(planner().selector, request("x", search=ClientSearch("query", "tool_search")), HEADERS,
                      "fallback", shared=False)
    assert turn is not None
    searches = Searches(engine(FailingEmbedder()), planner().selector.policy, turn.plan.catalog)
    assert turn.search is not None
    found = await searches.client_search(turn.search, json.dumps({"query": "the zeta tool"}))
    assert found.error is None and found.found[0] == "zeta"
    assert [type(error) for error in searches.late] == [EmbedderError]
    # No word in common with any tool: nothing is found (BM25 scores 0 are not matches).
    none = await searches.client_search(turn.search, json.dumps({"query": "unrelated words"}))
    assert none.found == () and none.error is None


# --- where the ladder takes it ----------------------------------------------------------


class Forwarder:
    """The edge of the ladder: records what is forwarded as sent."""

    def __init__(self) -> None:
        self.forwarded: list[Headers] = []

    async def forward(self, request: Any, send: Any, *, extra_response_headers: Headers = (),
                      **_: Any) -> None:
        self.forwarded.append(list(extra_response_headers))


async def no_send(message: Any) -> None:
    raise AssertionError("the ladder itself sends nothing here")


def client_request(**headers: str) -> ClientRequest:
    pairs = [(k.lower().replace("_", "-").encode(), v.encode()) for k, v in headers.items()]
    return ClientRequest("POST", "/v1/messages", b"/v1/messages", b"", pairs, b"{}", b"rid-1")


class Ladder:
    """One DecisionFlow with a fake planner outcome; records translations and serves."""

    def __init__(self, outcome: Turn | Exception, translated: Turn | None | Exception) -> None:
        self.forwarder = Forwarder()
        self.flow = DecisionFlow(api="messages", settings=Settings(),
                                 forwarder=self.forwarder,  # type: ignore[arg-type]
                                 metrics=Metrics())
        self.outcome, self.translated = outcome, translated
        self.translations: list[str] = []
        self.served: list[tuple[Turn, Headers]] = []

    async def run(self, **headers: str) -> None:
        async def read(raw: bytes) -> dict[str, Any]:
            return {"model": "m"}

        async def plan(body: dict[str, Any], headers: Headers, top_k: int | None, save: bool) -> Turn:
            if isinstance(self.outcome, Exception):
                raise self.outcome
            return self.outcome

        async def translate(body: dict[str, Any], headers: Headers, decision: str) -> Turn | None:
            self.translations.append(decision)
            if isinstance(self.translated, Exception):
                raise self.translated
            return self.translated

        async def serve(turn: Turn, body: dict[str, Any], report: Headers, started: float,
                        send: Any) -> None:
            if turn.whole is not None:
                turn.rounds = 1
                turn.meta_events.append({"tool": "client_search", "loaded": []})
            self.served.append((turn, report))

        await self.flow.run(client_request(**headers), no_send, read_body=read, plan=plan,
                            serve=serve, translate=translate)


def whole(decision: str) -> Turn:
    turn = whole_turn(planner().selector, request("x", search=REGEX), HEADERS, decision, shared=False)
    assert turn is not None
    return turn


@pytest.mark.parametrize(("failure", "decision", "report"), [
    (EmbedderError("down"), "fallback", [(b"x-tool-pruning-fallback", b"embedder_error")]),
    (RuntimeError("a defect in planning"), "fallback",
     [(b"x-tool-pruning-fallback", b"internal_error")]),
    (SmallCatalog(3, "native", "min_catalog_tools"), "small_catalog",
     [(b"x-tool-pruning-tools", b"3/3"), (b"x-tool-pruning-small-catalog", b"min_catalog_tools")]),
])
async def test_a_request_not_pruned_is_served_as_its_translate_only_turn(
    failure: Exception, decision: str, report: list[tuple[bytes, bytes]]
) -> None:
    """Served with its translation; a fallback's response says why (its log's reason)."""
    ladder = Ladder(failure, whole(decision))
    await ladder.run()
    assert ladder.translations == [decision]
    ((turn, served_report),) = ladder.served
    assert turn.whole == decision and served_report == report
    assert ladder.forwarder.forwarded == []


async def test_without_a_translation_the_bytes_go_as_sent() -> None:
    ladder = Ladder(EmbedderError("down"), None)
    await ladder.run()
    assert ladder.translations == ["fallback"] and ladder.served == []
    assert ladder.forwarder.forwarded == [[(b"x-tool-pruning-fallback", b"embedder_error")]]


async def test_a_translation_that_fails_sends_the_bytes_and_is_logged(log_lines: Lines) -> None:
    ladder = Ladder(SmallCatalog(3, "native", "min_catalog_tools"), KeyError("a defect in translating"))
    await ladder.run()
    assert ladder.served == [] and ladder.forwarder.forwarded == [
        [(b"x-tool-pruning-tools", b"3/3"), (b"x-tool-pruning-small-catalog", b"min_catalog_tools")]]
    (line,) = log_lines.events("translation_failed")
    assert (line["decision"], line["api"]) == ("small_catalog", "messages")
    assert line["error"].startswith("KeyError at ")


@pytest.mark.parametrize("mode", ["off", "pruned"])
async def test_the_off_switch_and_passthrough_never_translate(mode: str) -> None:
    from selection.errors import NothingToPrune

    if mode == "off":
        ladder = Ladder(whole("fallback"), whole("fallback"))
        await ladder.run(x_tool_pruning="off")
    else:
        ladder = Ladder(NothingToPrune(), whole("fallback"))
        await ladder.run()
    assert ladder.translations == [] and ladder.served == []
    assert ladder.forwarder.forwarded == [[]]


async def test_a_dry_run_serves_the_translation_and_logs_the_plan(
    log_lines: Lines, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="toolprune")
    planned = await planner(preload=False).plan(request("x", search=REGEX), HEADERS)
    ladder = Ladder(planned, whole("dry_run"))
    await ladder.run(x_tool_pruning="dry-run")
    assert ladder.translations == ["dry_run"]
    ((turn, report),) = ladder.served
    assert turn.whole == "dry_run"
    assert report == [(b"x-tool-pruning-tools", b"2/10; client=2; toolprune=0; search=0"),
                      (b"x-tool-pruning-dry-run", b"10/10")]
    (line,) = log_lines.events("pruning_decision")
    assert (line["decision"], line["forwarded"], line["offered"]) == ("dry_run", 2, 10)
    assert (line["rounds"], line["meta"]) == (1, [{"tool": "client_search", "loaded": []}])


# --- what each API's adapter reshapes ---------------------------------------------------
async def read_of(adapter: ResponsesApi | MessagesApi, body: dict[str, Any]) -> TurnInput:
    return (await adapter.read(body)).input



async def test_responses_namespaces_search_entries_and_items_are_reshaped() -> None:
    function = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}
    space = {"type": "namespace", "name": "crm", "description": "CRM.", "tools": [
        {"type": "function", "name": "get_customer", "parameters": {"type": "object"}}]}
    adapter = ResponsesApi()
    assert not (await read_of(adapter, {"model": "m", "input": "hi", "tools": [function]})).reshaped
    assert (await read_of(adapter, {"model": "m", "input": "hi", "tools": [function, space]})).reshaped
    searching = {"model": "m", "input": "hi",
                 "tools": [function, {"type": "tool_search", "execution": "client"}]}
    assert (await read_of(adapter, searching)).reshaped
    called = [{"type": "function_call", "call_id": "c", "name": "get_weather", "arguments": "{}"}]
    assert not (await read_of(adapter, {"model": "m", "input": called, "tools": [function]})).reshaped
    spaced = [{**called[0], "name": "get_customer", "namespace": "crm"}]
    read = await read_of(adapter, {"model": "m", "input": spaced, "tools": [function, space]})
    assert read.reshaped and read.body["input"][0]["name"] == "crm__get_customer"


async def test_messages_search_histories_and_deferred_server_tools_are_reshaped() -> None:
    tool = {"name": "alpha", "input_schema": {"type": "object"}}
    adapter = MessagesApi()
    ask = [{"role": "user", "content": "hi"}]
    assert not (await read_of(adapter, {"model": "m", "messages": ask, "tools": [tool]})).reshaped
    referenced = [*ask, {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t1", "name": "Search", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": [{"type": "tool_reference", "tool_name": "alpha"}]}]}]
    assert (await read_of(adapter, {"model": "m", "messages": referenced, "tools": [tool]})).reshaped
    server = {"type": "web_search_20250305", "name": "web_search", "defer_loading": True}
    assert (await read_of(adapter, {"model": "m", "messages": ask, "tools": [tool, server]})).reshaped
