"""A planner fed Chat Completions bodies, read as the proxy reads them
(:func:`proxy.apis.chat.adapter.read_chat`), for tests that plan chat requests."""

from __future__ import annotations

from typing import Any

from proxy.apis.chat.adapter import read_chat
from proxy.http.headers import Headers
from proxy.turn.planner import Planner
from proxy.turn.turn import Turn
from selection.catalog.cache import CatalogCache


class ChatPlanner:
    """``planner`` (every attribute of it) with :meth:`plan` taking a chat body."""

    def __init__(self, planner: Planner) -> None:
        self.planner = planner
        self.catalogs = CatalogCache(0)

    async def plan(self, body: dict[str, Any], headers: Headers, top_k: int | None = None) -> Turn:
        return await self.planner.plan(
            await read_chat(body, self.catalogs), headers, top_k
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self.planner, name)
