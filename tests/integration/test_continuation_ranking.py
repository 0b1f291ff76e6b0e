"""A request that sends a tool's result back, on a block that stays as the upstream's cache
holds it (tools delivered in the conversation), is planned without embedding its query:
nothing of it needs the ranking (the block stays, nothing is delivered before the model
asks but on a new user turn), so it costs the proxy no embedder call; a new user turn is
ranked as before (``toolprune_embedding_seconds`` counts the ranked requests). Every
acting API, plain and streamed; real servers on loopback (the proxy under uvicorn, the
scripted upstream).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.integration.test_conversation_delivery import send
from tests.support.conversations import answered
from tests.support.turn_apis import CASES, IDS, REAL, Bench, Call, Servers, bench, turn_servers


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    usage_db = tmp_path_factory.mktemp("usage") / "usage.db"
    with turn_servers({"conversation": {"late_tools": "conversation"},
                       "block": {"late_tools": "block"},
                       "learning": {"late_tools": "conversation", "learn": True,
                                    "usage_db": usage_db}}) as running:
        yield running


def ranked(run: Bench, body: dict[str, Any]) -> bool:
    """Whether the proxy ranked ``body``'s turn (embedded its query), sent as the test's
    client: the requests ``toolprune_embedding_seconds`` counted grew by one."""
    before = ranked_requests(run.proxy)
    send(run, body)
    return ranked_requests(run.proxy) == before + 1


def ranked_requests(proxy: str) -> float:
    metrics = httpx.get(proxy + "/metrics", timeout=30).text
    (count,) = re.findall(r"^toolprune_embedding_seconds_count (\S+)$", metrics, re.MULTILINE)
    return float(count)


@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_a_tool_result_sent_back_on_a_kept_block_is_not_embedded(
    servers: Servers, request: pytest.FixtureRequest, name: str, stream: bool
) -> None:
    run = bench(servers, "conversation", request, name, stream)
    api, saved = run.api, f"saved screenshot-{name}-{stream}.png"
    shot = Call("call_1", REAL, "{}")
    run.script(api.reply(calls=(shot,)), api.reply("The screenshot is taken."),
               api.reply("Setting it."))
    body = api.body(stream)
    assert ranked(run, body)
    result = answered(name, body, [shot], saved)
    assert not ranked(run, result)
    first, second = run.bodies()
    assert api.offered(second) == api.offered(first)  # the block stays
    assert [call.name for call in api.exchanged(second)] == [REAL]  # the result went on
    ask = f"Now set a session cookie named theme-{name}-{stream} with the value dark"
    follow = answered(name, result, [], "", text="The screenshot is taken.", ask=ask)
    assert ranked(run, follow)  # a new user turn is ranked


@pytest.mark.parametrize("proxy", ["block", "learning"])
@pytest.mark.parametrize(("name", "stream"), CASES[:2], ids=IDS[:2])
def test_a_block_chosen_each_turn_or_a_usage_log_that_learns_ranks_every_request(
    servers: Servers, request: pytest.FixtureRequest, name: str, stream: bool, proxy: str
) -> None:
    """A block chosen each turn needs each turn's ranking; learning keeps each turn's
    ranking in the usage log."""
    run = bench(servers, proxy, request, name, stream)
    api, saved = run.api, f"saved screenshot-{name}-{stream}.png"
    shot = Call("call_1", REAL, "{}")
    run.script(api.reply(calls=(shot,)), api.reply("The screenshot is taken."))
    body = api.body(stream)
    send(run, body)
    assert ranked(run, answered(name, body, [shot], saved))
