"""The proxy's log records, collected for assertions (the ``log_lines`` fixture)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any


class Lines(logging.Handler):
    """The proxy's log records: (event, fields)."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[tuple[str, dict[str, Any]]] = []
        self._added = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        with self._added:
            self.lines.append((record.getMessage(), dict(getattr(record, "fields", {}))))
            self._added.notify_all()

    def wait_for(self, name: str, request_id: str, timeout: float = 30) -> dict[str, Any]:
        """The ``name`` line of request ``request_id``, once written (a request's lines
        may come just after the client got its response); TimeoutError if not."""

        def found() -> list[dict[str, Any]]:
            return [f for f in self.events(name) if f.get("request_id") == request_id]

        with self._added:
            if not self._added.wait_for(found, timeout):
                raise TimeoutError(f"no {name} line for request {request_id}")
        (line,) = found()
        return line

    def events(self, name: str) -> list[dict[str, Any]]:
        return [fields for event, fields in self.lines if event == name]

    def wait_until(
        self, name: str, match: Callable[[dict[str, Any]], bool] = lambda fields: True,
        timeout: float = 30,
    ) -> dict[str, Any]:
        """The first ``name`` line that ``match`` accepts, once written (by a background
        task: a start-up step, a periodic refresh); TimeoutError if none comes."""

        def found() -> list[dict[str, Any]]:
            return [f for f in self.events(name) if match(f)]

        with self._added:
            if not self._added.wait_for(found, timeout):
                raise TimeoutError(f"no matching {name} line")
        return found()[0]
