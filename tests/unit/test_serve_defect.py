"""A defect in writing a turn's first round (proxy/turn/rounds.py) costs the pruning, never
the request: nothing was sent yet, so the client's request is forwarded as it came, and the
defect is logged and noted for the decision log. The turn is planned for real (a planner
whose engine embeds by keywords); the edge of the unit — the API's request writer that
fails, and the forwarder — stands in for the rest."""

from __future__ import annotations

from typing import Any

from proxy.http.forwarding import ClientRequest
from proxy.metrics import Metrics
from proxy.turn.adapter import ClientOut
from proxy.turn.context import TurnServices
from proxy.turn.rounds import serve_turn
from tests.unit.test_deferral_planning import HEADERS, planner, request


class FailingWriter:
    """An API request whose first round cannot be written (a defect)."""

    def __init__(self, read: Any) -> None:
        self.input = read

    def upstream_body(self, turn: Any, with_meta: bool) -> bytes:
        raise TypeError("unhashable type: 'dict'")


class Forwarder:
    """Records what was forwarded as it came."""

    def __init__(self) -> None:
        self.forwarded: list[tuple[ClientRequest, Any]] = []

    async def forward(self, request: ClientRequest, send: Any, **options: Any) -> None:
        self.forwarded.append((request, options))


async def test_a_defect_in_writing_the_first_round_forwards_the_request_as_sent() -> None:
    read = request("gamma please")
    turn = await planner().plan(read, HEADERS)
    forwarder = Forwarder()
    services = TurnServices(api="chat_completions", forwarder=forwarder,  # type: ignore[arg-type]
                            metrics=Metrics(), max_meta_rounds=1,
                            run_meta_calls=lambda turn, calls: None)  # type: ignore[arg-type,return-value]
    client = ClientRequest("POST", "/v1/chat/completions", b"/v1/chat/completions", b"", [], b"{}",
                           b"req-1")

    async def send(message: Any) -> None:
        raise AssertionError("nothing is sent before the forward")

    report = [(b"x-tool-pruning-tools", b"3/6")]
    await serve_turn(services, FailingWriter(read), turn, client,  # type: ignore[arg-type]
                     ClientOut(send, report, lambda: None), stream=False)
    ((forwarded, options),) = forwarder.forwarded
    assert forwarded is client and options["extra_response_headers"] == report
    (note,) = turn.notes
    assert note.startswith("forwarded as sent: TypeError at test_serve_defect.py:")
