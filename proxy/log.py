"""Structured logging: one JSON object per line on stderr.

Log records carry only what callers pass in ``extra={"fields": {...}}``; the proxy never
passes message content, request or response bodies, or credentials.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import traceback

LOGGER_NAME = "toolprune"
#: Longest string a log field keeps (client-chosen values such as tool names are
#: otherwise unbounded: a catalogue may hold a name of 256 KiB); longer ones are cut
#: and end with "…".
MAX_FIELD_CHARS = 256


def bounded(value: object) -> object:
    """``value`` with every string in it (nested in lists, tuples and dicts too) cut to
    :data:`MAX_FIELD_CHARS` characters."""
    if isinstance(value, str):
        return value if len(value) <= MAX_FIELD_CHARS else value[: MAX_FIELD_CHARS - 1] + "…"
    if isinstance(value, dict):
        return {bounded(key): bounded(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [bounded(item) for item in value]
    return value


class JsonFormatter(logging.Formatter):
    """Formats a record as ``{"ts", "level", "logger", "event", **fields}``, each field's
    strings cut to :data:`MAX_FIELD_CHARS` (:func:`bounded`)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        fields: dict[str, object] = getattr(record, "fields", {})
        entry.update({key: bounded(value) for key, value in fields.items()})
        if record.exc_info and record.exc_info[1] is not None:
            entry["exception"] = record.exc_info[1].__class__.__name__
            entry["at"] = where(record.exc_info[1])
        return json.dumps(entry, default=str)


def where(exc: BaseException) -> str:
    """``file:line`` of the innermost frame of ``exc``'s traceback (no message text, which
    may quote request content)."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "unknown"
    frame = frames[-1]
    return f"{frame.filename.rsplit('/', 1)[-1]}:{frame.lineno}"


def configure_logging(level: str) -> None:
    """Send the ``toolprune`` logger's records to stderr as JSON lines."""
    logger = logging.getLogger(LOGGER_NAME)
    logger.setLevel(level.upper())
    if not any(isinstance(h.formatter, JsonFormatter) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter())
        logger.addHandler(handler)
    logger.propagate = False


#: ``logging.config.dictConfig`` for the server's own loggers (uvicorn's start-up, shutdown
#: and error lines), so that every line on stderr is one JSON object like the proxy's;
#: uvicorn sets their level from ``log_level`` after applying it. Access lines are off
#: (``access_log=False``): the proxy logs each request itself.
SERVER_LOG_CONFIG: dict[str, object] = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"json": {"()": "proxy.log.JsonFormatter"}},
    "handlers": {
        "stderr": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    },
    "loggers": {
        "uvicorn": {"handlers": ["stderr"], "propagate": False},
        "uvicorn.error": {"propagate": True},
    },
}


def get_logger(name: str) -> logging.Logger:
    """A child of the ``toolprune`` logger."""
    return logging.getLogger(f"{LOGGER_NAME}.{name}")


class RateLimitedLog:
    """Logs an error at most once per ``interval_s`` seconds per key; counts the rest.

    The first record after a quiet interval carries ``suppressed``: how many records of
    that key were dropped since the last one.
    """

    def __init__(self, logger: logging.Logger, interval_s: float) -> None:
        self._logger = logger
        self._interval_s = interval_s
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def error(self, key: str, event: str, fields: dict[str, object]) -> None:
        now = time.monotonic()
        last = self._last.get(key)
        if last is not None and now - last < self._interval_s:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return
        self._last[key] = now
        suppressed = self._suppressed.pop(key, 0)
        self._logger.error(event, extra={"fields": {**fields, "suppressed": suppressed}})
