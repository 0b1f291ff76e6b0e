"""``run_until_disconnect``: the handler and the disconnect watcher never outlive the call
(integration tests cover the same through uvicorn: tests/integration/test_passthrough.py)."""

from __future__ import annotations

import asyncio

import pytest

from proxy.http.asgi import run_until_disconnect


class Receive:
    """An ASGI ``receive`` that yields ``http.disconnect`` once ``disconnect`` is set."""

    def __init__(self) -> None:
        self.disconnect = asyncio.Event()
        self.waiting = 0

    async def __call__(self) -> dict[str, str]:
        self.waiting += 1
        try:
            await self.disconnect.wait()
        finally:
            self.waiting -= 1
        return {"type": "http.disconnect"}


async def test_a_completed_handler_returns_true_and_stops_the_watcher() -> None:
    receive = Receive()
    ran = []

    async def handler() -> None:
        await asyncio.sleep(0)
        ran.append(True)

    assert await run_until_disconnect(receive, handler) is True
    assert ran == [True]
    assert receive.waiting == 0


async def test_a_disconnect_cancels_the_handler() -> None:
    receive = Receive()
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def handler() -> None:
        started.set()
        try:
            await asyncio.Event().wait()  # an upstream that never answers
        except asyncio.CancelledError:
            cancelled.set()
            raise

    call = asyncio.create_task(run_until_disconnect(receive, handler))
    await started.wait()
    receive.disconnect.set()
    assert await call is False
    assert cancelled.is_set()


async def test_the_handlers_exception_is_raised() -> None:
    async def handler() -> None:
        raise KeyError("defect")

    with pytest.raises(KeyError):
        await run_until_disconnect(Receive(), handler)


async def test_cancelling_the_caller_cancels_both_tasks() -> None:
    """Server shutdown cancels the request's task: the handler is cancelled, the watcher
    stops, and the caller sees CancelledError."""
    receive = Receive()
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def handler() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    call = asyncio.create_task(run_until_disconnect(receive, handler))
    await started.wait()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert cancelled.is_set()
    assert receive.waiting == 0
