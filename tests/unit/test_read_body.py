"""``read_body``'s deadline: ``timeout_s`` plus one second per ``min_rate`` bytes received
(mod_reqtimeout's rule). The fake ``receive`` hands out chunks when the test says so; the
deadlines are the function's own timers."""

from __future__ import annotations

import asyncio

import pytest

from proxy.http.asgi import read_body
from proxy.http.errors import BodyTimeout


class Receive:
    """Yields ``chunks`` in order, each once its event is set; the last ends the body."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.ready = [asyncio.Event() for _ in chunks]
        self.given = 0

    async def __call__(self) -> dict[str, object]:
        index = self.given
        await self.ready[index].wait()
        self.given += 1
        return {"type": "http.request", "body": self.chunks[index], "more_body": index < len(self.chunks) - 1}


async def test_bytes_received_extend_the_deadline() -> None:
    receive = Receive([b"x" * 100, b"y"])
    receive.ready[0].set()
    # 100 bytes at 10 bytes/s add 10 s to the 0.1 s deadline: the last chunk, 0.3 s
    # later, still arrives in time.
    asyncio.get_running_loop().call_later(0.3, receive.ready[1].set)
    assert await read_body(receive, [], 1000, timeout_s=0.1, min_rate=10) == b"x" * 100 + b"y"


async def test_a_body_that_trickles_below_the_rate_times_out() -> None:
    receive = Receive([b"x", b"y"])
    receive.ready[0].set()  # one byte at 10 bytes/s adds 0.1 s; the rest never comes
    with pytest.raises(BodyTimeout):
        await read_body(receive, [], 1000, timeout_s=0.1, min_rate=10)
    assert receive.given == 1


async def test_without_a_rate_the_deadline_is_fixed() -> None:
    receive = Receive([b"x" * 100, b"y"])
    receive.ready[0].set()
    with pytest.raises(BodyTimeout):
        await read_body(receive, [], 1000, timeout_s=0.1, min_rate=0)
