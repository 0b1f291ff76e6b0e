"""The proxy learns the server's speeds from its answers and plans in seconds (issue 57),
through the real proxy under uvicorn in front of the scripted upstream
(``benchmarks/support/upstream.py``), on every acting API, plain and streamed:

* an answer's ``timings`` (llama-server's) make the model's speeds known: ``/readyz``, the
  metrics and the next request's decision line show them; also the answer to a request
  the proxy forwards unchanged (an agent's side request with no tools), so the agent's
  first conversation is planned in seconds;
* with speeds known (here set, as for a server that reports none), a conversation's
  first block is sized by the seconds it is expected to save (a decode-slow server's is
  the larger), a new user turn gets the missing tools worth their prefill before the
  model asks, not every one it lacks (``proactive_loads=auto``), and a search loads the
  finds worth their prefill, listing the others;
* with speeds unknown, the token-only plan stands (the policy's top-k, no proactive
  delivery, a search loading all it finds).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from benchmarks.support.upstream import Chat
from tests.support.conversations import answered, history_of, with_history
from tests.support.logs import Lines
from tests.support.turn_apis import CASES, IDS, Bench, Call, Servers, bench, turn_servers

#: A first request many tools fit about alike (its ranking's best tools close together):
#: where a tool's chance is read from its score's gap below the best, these earn a place
#: in a decode-slow server's first block.
BROAD = "Check that example.com works in the browser"
#: A second user turn whose best tool (``browser_cookie_set``) the first block lacks.
COOKIES = "Now set a session cookie named theme with the value dark for example.com"
#: Tools delivered in the conversation; ``search_tools`` offered (69 tools are fewer than
#: its default threshold).
CONVERSATION = {"late_tools": "conversation", "search_tools_min_catalog": 10}
#: The default top-k (8), which the seconds may size; a configured one stays.
SIZED = {**CONVERSATION, "top_k": None}
#: Sized, with room for the seconds to add to the default top-k (max_tools above it).
ROOM = {**SIZED, "max_tools": 24}
#: Ryzen AI NPU (decode-slow) and Apple M3 Max (prefill-slow relative to decode), tok/s.
NPU = {"prefill_tokens_per_s": 300.0, "decode_tokens_per_s": 10.0}
APPLE = {"prefill_tokens_per_s": 505.0, "decode_tokens_per_s": 49.0}
TIMINGS = {"prompt_n": 2400, "prompt_ms": 800.0, "predicted_n": 30, "predicted_ms": 1500.0}


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    with turn_servers({"npu": {**SIZED, **NPU}, "apple": {**SIZED, **APPLE},
                       "unknown": SIZED, "learning": CONVERSATION,
                       "side_plain": SIZED, "side_streamed": SIZED,
                       **{f"{name}_room": {**ROOM, **speeds} for name, speeds in
                          (("npu", NPU), ("apple", APPLE), ("unknown", {}))},
                       "configured": {**CONVERSATION, **NPU}, "rounds": {**CONVERSATION, **NPU},
                       "terse": {**SIZED, **APPLE},
                       "always": {**SIZED, "proactive_loads": "always"}}) as running:
        yield running


def send(run: Bench, body: dict[str, Any]) -> Any:
    response = httpx.post(run.proxy + run.api.path, json=body, headers=run.credential, timeout=300)
    return run.api.read(response, run.stream)


def client_tools(run: Bench, body: dict[str, Any]) -> list[str]:
    return [name for name in run.api.offered(body) if name not in ("load_tools", "search_tools",
                                                                    "call_tool")]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_the_speeds_an_answers_timings_report_are_learned_and_shown(
    servers: Servers, request: pytest.FixtureRequest, stream: bool, log_lines: Lines
) -> None:
    run = bench(servers, "learning", request, "chat", stream)
    run.script(Chat(content="Done.", timings=TIMINGS), Chat(content="Again."))
    run.post()
    run.post()
    ready = httpx.get(run.proxy + "/readyz", timeout=30).json()
    (speed,) = ready["server"]["speeds"].values()
    assert speed == {"prefill_tokens_per_s": 3000.0, "decode_tokens_per_s": 20.0,
                     "prefill_source": "timings", "decode_source": "timings",
                     "search_call_tokens": None}
    metrics = httpx.get(run.proxy + "/metrics", timeout=30).text
    assert "toolprune_upstream_prefill_tokens_per_second 3000.0" in metrics
    assert "toolprune_upstream_decode_tokens_per_second 20.0" in metrics
    line = log_lines.wait_for("pruning_decision", run.sent()[1].header("x-request-id") or "")
    assert line["speed"] == {"prefill_tokens_per_s": 3000.0, "decode_tokens_per_s": 20.0,
                             "search_call_tokens": 24.0}


@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_what_a_models_search_rounds_cost_is_learned_shown_and_planned_with(
    servers: Servers, request: pytest.FixtureRequest, name: str, stream: bool, log_lines: Lines
) -> None:
    """The tokens the model wrote in a round that only searched (its answer's ``usage``)
    are learned for the model: ``/readyz``, the metrics and the next decision line show
    them. A round of the client's own call, or the turn's answer, is no search round."""
    run = bench(servers, "rounds", request, name, stream)
    usage = {"stream_options": {"include_usage": True}} if name == "chat" and stream else {}
    search = Call("meta_1", "search_tools", json.dumps({"query": "manage browser cookies"}))
    navigate = Call("call_1", "browser_navigate", json.dumps({"url": "https://example.com"}))
    run.script(run.api.reply(calls=(navigate,), generated=900))
    assert run.post(**usage).calls == ["browser_navigate"]
    run.script(run.api.reply(calls=(search,), generated=180),
               run.api.reply("Found them.", generated=7))
    run.post(ask="Find the browser cookie tools", **usage)
    (speed,) = httpx.get(run.proxy + "/readyz", timeout=30).json()["server"]["speeds"].values()
    assert speed["search_call_tokens"] == 180.0
    metrics = httpx.get(run.proxy + "/metrics", timeout=30).text
    assert "toolprune_upstream_search_call_tokens 180.0" in metrics
    run.script(run.api.reply("Done."))
    run.post(**usage)
    line = log_lines.wait_for("pruning_decision", run.sent()[-1].header("x-request-id") or "")
    assert line["speed"] == {**NPU, "search_call_tokens": 180.0}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_side_requests_answer_teaches_the_speeds_the_first_block_is_sized_by(
    servers: Servers, request: pytest.FixtureRequest, stream: bool, log_lines: Lines
) -> None:
    run = bench(servers, "side_streamed" if stream else "side_plain", request, "chat", stream)
    side = {key: value for key, value in run.api.body(stream).items() if key != "tools"}
    run.script(Chat(content="A title", timings=TIMINGS), run.api.reply("Done."))
    titled = httpx.post(run.proxy + run.api.path, json=side, headers=run.credential, timeout=300)
    assert titled.status_code == 200 and "\"predicted_ms\": 1500.0" in titled.text  # as it came
    assert run.sent()[0].json() == side
    ready = httpx.get(run.proxy + "/readyz", timeout=30).json()
    (speed,) = ready["server"]["speeds"].values()
    assert speed == {"prefill_tokens_per_s": 3000.0, "decode_tokens_per_s": 20.0,
                     "prefill_source": "timings", "decode_source": "timings",
                     "search_call_tokens": None}
    run.post()  # the agent's first conversation
    line = log_lines.wait_for("pruning_decision", run.sent()[1].header("x-request-id") or "")
    assert line["speed"] == {"prefill_tokens_per_s": 3000.0, "decode_tokens_per_s": 20.0,
                             "search_call_tokens": 24.0}
    assert line["first_block"] is not None


@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_a_decode_slow_server_gets_the_larger_first_block(
    servers: Servers, request: pytest.FixtureRequest, name: str, stream: bool, log_lines: Lines
) -> None:
    """The seconds add to the token-only plan's top-k where decode is slow and the
    request's best tools are close; where they would take from it (prefill-slow), the
    token plan's block stays."""
    sizes = {}
    for proxy in ("npu_room", "apple_room", "unknown_room", "unknown", "configured"):
        run = bench(servers, proxy, request, name, stream)
        run.script(run.api.reply("Done."))
        run.post(ask=BROAD)
        sizes[proxy] = len(client_tools(run, run.bodies()[0]))
        line = log_lines.wait_for("pruning_decision", run.sent()[0].header("x-request-id") or "")
        assert (line["first_block"] is None) == (proxy in ("unknown_room", "unknown", "configured"))
    assert sizes["npu_room"] > sizes["apple_room"] == sizes["unknown_room"]
    assert sizes["unknown"] == 6  # the default top-k (8) under max_tools 6: the token plan
    assert sizes["configured"] == 4  # a top-k the operator set stays


def second_turn(run: Bench) -> tuple[dict[str, Any], dict[str, Any], list[Any]]:
    """A first turn, then a new user turn asking for what the block lacks: the second
    upstream request's body and what it holds after the client's history."""
    api = run.api
    run.script(api.reply("The screenshot is taken."))
    body = api.body(run.stream)
    send(run, body)
    follow = answered(api.name, body, [], "", text="The screenshot is taken.", ask=COOKIES)
    run.script(api.reply("Setting it."))
    send(run, follow)
    first, second = run.bodies()
    return first, second, history_of(api.name, second)[len(history_of(api.name, follow)):]


def delivered(run: Bench) -> list[str]:
    """What the proxy delivered on the new user turn of :func:`second_turn`, before the
    model asked (the block staying as it was)."""
    first, second, added = second_turn(run)
    assert run.api.offered(second) == run.api.offered(first)
    if not added:
        return []
    (call,) = run.api.exchanged(with_history(run.api.name, second, added))
    assert call.name == "search_tools"  # the proxy's own call of the meta-tool offered
    ((_, result),) = run.api.results(with_history(run.api.name, second, added))
    return [tool["name"] for tool in json.loads(result)["tools"]]


@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_with_speeds_known_a_new_turn_gets_the_missing_tools_worth_their_prefill(
    servers: Servers, request: pytest.FixtureRequest, name: str, stream: bool
) -> None:
    """The turn's best missing tool and those close behind it that are cheap enough, not
    every best tool the block lacks (``always``)."""
    worth = delivered(bench(servers, "apple", request, name, stream))
    every = delivered(bench(servers, "always", request, name, stream))
    assert "browser_cookie_set" in worth and set(worth) < set(every)


@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_with_speeds_unknown_the_model_asks_first(
    servers: Servers, request: pytest.FixtureRequest, name: str, stream: bool
) -> None:
    assert delivered(bench(servers, "unknown", request, name, stream)) == []


def searched(run: Bench, generated: int | None = None) -> list[str]:
    """The tools a ``search_tools`` call for cookie tools delivered (the test's latest
    request; the search round's answer says the model wrote ``generated`` tokens)."""
    search = Call("meta_1", "search_tools", json.dumps({"query": "manage browser cookies"}))
    run.script(run.api.reply(calls=(search,), generated=generated), run.api.reply("Found them."))
    run.post(ask="Find the browser cookie tools")
    ((_, result),) = run.api.results(run.bodies()[-1])
    return [tool["name"] for tool in json.loads(result).get("tools", [])]


@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_with_speeds_known_a_search_loads_only_the_finds_worth_their_prefill(
    servers: Servers, request: pytest.FixtureRequest, name: str, stream: bool
) -> None:
    known = searched(bench(servers, "apple", request, name, stream))
    unknown = searched(bench(servers, "unknown", request, name, stream))
    assert 1 <= len(known) < len(unknown)
    assert known == unknown[: len(known)]


@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_a_search_loads_its_best_new_find_however_cheap_a_search_round_is(
    servers: Servers, request: pytest.FixtureRequest, name: str, stream: bool
) -> None:
    """A model whose search calls are terse (4 tokens a round, learned from the first
    search) spares little by a find loaded unasked; a search still loads the best find
    the model does not hold, the block's finds being no load."""
    run = bench(servers, "terse", request, name, stream)
    searched(run, generated=4)
    assert len(searched(run)) == 1
