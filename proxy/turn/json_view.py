"""The client's view of a typed API's plain answer (Responses, Messages): one JSON response
after the last round, as the upstream's last answer with its meta-calls removed and its
``usage`` summed over rounds.

Every round is read whole (an event stream too: it is no answer of the API's shape, so
the first round's is relayed as it is). A body that is not the API's answer is relayed as
it is (nothing was sent yet).
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from proxy.http.asgi import send_complete, send_error
from proxy.http.errors import ProxyError
from proxy.http.upstream import UpstreamResponse
from proxy.turn.adapter import ClientOut, ClientView, Reply
from proxy.turn.events import client_headers
from proxy.turn.turn import Turn, add_usage, json_bytes, json_value


class JsonView(ClientView):
    """See the module docstring; one per client response."""

    reads_events = False

    def __init__(self, turn: Turn, out: ClientOut) -> None:
        super().__init__(turn, out)
        self.usage: dict[str, Any] | None = None
        self.data: dict[str, Any] = {}
        self.reply = Reply()
        self.notes: list[str] = []
        self._headers: list[tuple[bytes, bytes]] = []

    @property
    def started(self) -> bool:
        return False  # nothing is sent before the whole answer is known

    @property
    def shown_output(self) -> bool:
        return self.shows_output()

    async def start_round(self, response: UpstreamResponse) -> None:
        await super().start_round(response)
        self._headers = client_headers(response, self.out.headers)

    async def event(self, name: str | None, data: dict[str, Any]) -> bool:
        raise AssertionError("a JSON view reads every answer whole")

    async def body(self, raw: bytes) -> bool:
        try:
            data = json_value(raw)
            if not isinstance(data, dict):
                raise TypeError("the response is not an object")
            reply = self.read_reply(data)
        except (ValueError, KeyError, TypeError, RecursionError):
            return False
        self.usage = add_usage(self.usage, data.get("usage"))
        self.data, self.reply = data, reply
        return True

    async def end_round(self) -> Reply:
        return self.reply

    async def note(self, text: str) -> None:
        self.notes.append(text)

    async def finish(self, reply: Reply, only_meta: bool) -> None:
        self.finish_reply(self.data)
        self.note_output()
        await send_complete(self.out.send, 200, self._headers, json_bytes(self.data))

    async def fail(self, error: ProxyError) -> None:
        await send_error(self.out.send, error, headers=self.out.headers)

    async def fail_upstream(self, error: Any) -> None:
        """Answer 502 with the upstream's error object (a plain view has not started, so
        an upstream's error answer is relayed before this is needed)."""
        body = json_bytes({"error": error})
        headers = [(b"content-type", b"application/json"), *self.out.headers]
        await send_complete(self.out.send, 502, headers, body)

    # --- the API's answer ----------------------------------------------------------
    @abstractmethod
    def read_reply(self, data: dict[str, Any]) -> Reply:
        """Split one answer. Raises ValueError/KeyError/TypeError when it has not the
        API's shape (it is then relayed as it is)."""

    @abstractmethod
    def shows_output(self) -> bool:
        """Whether the client's answer, as it stands, has any content or call."""

    @abstractmethod
    def finish_reply(self, data: dict[str, Any]) -> None:
        """Make ``data`` (the last round's answer) what the client sees: meta-calls removed,
        :attr:`usage` summed over rounds, the stop reason consistent with what is left, the
        :attr:`notes` added."""
