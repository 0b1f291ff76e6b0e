"""The JSON log line: client-chosen strings (tool names) cannot make it unbounded."""

from __future__ import annotations

import json
import logging

from proxy.log import MAX_FIELD_CHARS, JsonFormatter


def record(fields: dict[str, object]) -> logging.LogRecord:
    entry = logging.LogRecord("toolprune.decision", logging.INFO, __file__, 1, "pruning_decision",
                              None, None)
    entry.fields = fields
    return entry


def test_long_strings_in_fields_are_cut_and_the_rest_is_kept() -> None:
    huge = "t" * 1_000_000
    line = JsonFormatter().format(record({
        "admitted": [huge, "get_me"],
        "reasons": {huge: "semantic"},
        "best_left_out": [[huge, 0.5]],
        "forwarded": 4,
    }))
    entry = json.loads(line)
    assert len(line) < 5 * MAX_FIELD_CHARS
    cut = "t" * (MAX_FIELD_CHARS - 1) + "…"
    assert entry["admitted"] == [cut, "get_me"]
    assert entry["reasons"] == {cut: "semantic"}
    assert entry["best_left_out"] == [[cut, 0.5]]
    assert entry["forwarded"] == 4
    assert entry["event"] == "pruning_decision"


def test_strings_at_the_limit_are_kept_whole() -> None:
    name = "n" * MAX_FIELD_CHARS
    assert json.loads(JsonFormatter().format(record({"tier": [name]})))["tier"] == [name]
