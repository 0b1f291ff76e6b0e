"""The proxy's log records, collected for assertions (the ``log_lines`` fixture)."""

from __future__ import annotations

import logging
import threading
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
