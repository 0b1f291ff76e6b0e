"""The usage analysis (proxy/usage/analysis.py, examples.py, report.py) and the usage
log's pure parts and retention (proxy/usage/history.py, reader.py, schema.py)."""

from __future__ import annotations

import sqlite3
import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from config.policy import load_policy
from config.settings import Settings
from proxy.usage.analysis import (
    add_token_counts,
    analyse,
    projected_saving,
    suggest_core,
    tool_table,
)
from proxy.usage.examples import examples_toml, harvest_examples, toml_string
from proxy.usage.history import history_calls
from proxy.usage.reader import parse_since, read_usage
from proxy.usage.records import CallRecord, ExampleRecord, RequestRecord, UsageData
from proxy.usage.report import format_report
from proxy.usage.schema import apply_retention
from proxy.usage.writer import UsageLog

DAY = 86400.0


def call(conversation: str, tool: str, turn: int, status: str = "forwarded") -> CallRecord:
    return CallRecord(ts=1.0, conversation=conversation, tool=tool, turn=turn, status=status, catalog="cat")


def acting(conversation: str, turn: int, saved: int = 100) -> RequestRecord:
    return RequestRecord(ts=1.0, decision="pruned", conversation=conversation, catalog="cat",
                         turn=turn, schema_bytes_saved=saved)


@pytest.fixture
def data() -> UsageData:
    calls = [
        call("a", "search", 1), call("a", "search", 2), call("a", "open", 3, "loaded"),
        call("b", "search", 2), call("b", "open", 1, "miss"), call("b", "open", 4, "history"),
        call("c", "search", 1), call("c", "close", 5, "loaded"),
        call("d", "zip", 1),
    ]
    requests = [acting("a", t) for t in (1, 2, 3)] + [acting("b", 1), acting("c", 1), acting("d", 1),
                                                      acting("e", 1)]
    requests.append(RequestRecord(ts=2.0, decision="fallback", reason="embedder_error"))
    catalogs = {"cat": {"search": 100, "open": 200, "close": 300, "zip": 50, "unused": 1000}}
    return UsageData(requests, calls, catalogs)


def test_tool_table_counts_shares_first_turns_and_statuses(data: UsageData) -> None:
    table = {row.tool: row for row in tool_table(data)}
    assert [row.tool for row in tool_table(data)] == ["search", "open", "close", "zip"]
    search, opened = table["search"], table["open"]
    assert (search.calls, search.conversations, search.forwarded) == (4, 3, 4)
    assert search.conversation_share == pytest.approx(3 / 5)  # a..e: e made no call
    assert search.median_first_turn == 1.0  # first turns 1, 2, 1
    assert search.first_turn_conversations == 2
    assert (opened.calls, opened.loaded, opened.misses, opened.history) == (3, 1, 1, 1)
    assert opened.median_first_turn == 2.0  # first turns 3 (a) and 1 (b)
    assert table["close"].loaded == 1 and table["close"].median_first_turn == 5.0


def test_suggested_core_is_the_smallest_set_covering_the_share(data: UsageData) -> None:
    table = tool_table(data)
    assert suggest_core(table, 5, core_share=0.0, first_turn_share=1.0).names == []
    # search alone covers 4 of 9 calls: short of a half, so open (3) joins.
    half = suggest_core(table, 5, core_share=0.5, first_turn_share=1.0)
    assert half.names == ["search", "open"] and half.covered_calls == 7
    assert half.covered_share == pytest.approx(7 / 9) and half.total_calls == 9
    assert suggest_core(table, 5, core_share=4 / 9, first_turn_share=1.0).names == ["search"]
    assert suggest_core(table, 5, core_share=7 / 9, first_turn_share=1.0).names == ["search", "open"]
    most = suggest_core(table, 5, core_share=0.9, first_turn_share=1.0)
    assert most.names == ["search", "open", "close", "zip"] and most.covered_share == 1.0
    with pytest.raises(ValueError):
        suggest_core(table, 5, core_share=1.5)


def test_first_turn_tools_join_the_core(data: UsageData) -> None:
    table = tool_table(data)
    core = suggest_core(table, 5, core_share=0.4, first_turn_share=0.2)
    # search covers 4/9 ≥ 0.4; open (turn 1 in b) and zip (turn 1 in d) are first-turn
    # needs of 1/5 conversations each.
    assert core.by_share == ["search"] and core.first_turn == ["open", "zip"]
    assert core.names == ["search", "open", "zip"] and core.covered_calls == 8
    assert suggest_core(table, 5, core_share=0.4, first_turn_share=0.3).first_turn == []


def test_projected_saving_in_bytes_and_tokens(data: UsageData) -> None:
    saving = projected_saving(data, ["search", "open"])
    (row,) = saving["catalogs"]
    assert (row["full_bytes"], row["core_bytes"], row["requests"]) == (1650, 300, 7)
    assert row["saving_bytes_per_request"] == 1350 and saving["saving_bytes_total"] == 1350 * 7
    assert row["observed_saving_bytes_mean"] == 100
    assert saving["tokens"] == "estimate" and saving["saving_tokens_total_estimate"] == 1350 * 7 // 4
    add_token_counts(saving, {"cat": (400, 90)})
    assert saving["tokens"] == "tokenizer" and saving["saving_tokens_total"] == 310 * 7
    assert row["saving_tokens_per_request"] == 310


def test_harvested_examples_rank_by_conversations_then_specificity() -> None:
    records = [
        ExampleRecord("search", "find  the\nreport", "a"),
        ExampleRecord("search", "find the report", "b"),
        ExampleRecord("open", "find the report", "b"),
        ExampleRecord("search", "look up the weather", "c"),
        ExampleRecord("search", "grep for errors", "d"),
        ExampleRecord("search", "x" * 401, "e"),
        ExampleRecord("search", "   ", "f"),
    ]
    examples = harvest_examples(records, per_tool=2)
    assert [e.text for e in examples["search"]] == ["find the report", "grep for errors"]
    assert (examples["search"][0].conversations, examples["search"][0].tools) == (2, 2)
    assert [e.text for e in examples["open"]] == ["find the report"]
    assert harvest_examples(records, per_tool=2, max_chars=500)["search"][1].text == "grep for errors"


def test_examples_fragment_is_a_valid_policy_file() -> None:
    nasty = 'say "hi" \\ then\ttab\nnewline \x00\x1f\x7f ünïcödé \ud800 end'
    records = [ExampleRecord("a.b:c-d", nasty, "1"), ExampleRecord("plain", "list my files", "1")]
    fragment = examples_toml(harvest_examples(records, max_chars=1000))
    parsed = tomllib.loads(fragment)
    assert parsed["examples"]["plain"] == ["list my files"]
    (text,) = parsed["examples"]["a.b:c-d"]
    assert text == " ".join(nasty.split()).replace("\ud800", "?")
    policy = load_policy(Settings(), parsed)
    assert policy.examples["plain"] == ("list my files",)


@given(st.text())
def test_toml_strings_round_trip(text: str) -> None:
    expected = text.encode("utf-8", errors="replace").decode("utf-8")
    assert tomllib.loads(f"x = {toml_string(text)}")["x"] == expected


def test_analyse_and_terminal_report(data: UsageData) -> None:
    data.examples.append(ExampleRecord("search", "find the report", "a"))
    report = analyse(data, core_share=0.5, first_turn_share=1.0)
    assert report["requests"]["acting"] == 7 and report["requests"]["fallback"] == 1
    assert report["requests"]["fallback_reasons"] == {"embedder_error": 1}
    assert report["calls"] == {"total": 9, "forwarded": 4 + 1, "loaded": 2, "miss": 1, "history": 1}
    assert report["conversations"] == 5
    text = format_report(report)
    assert "search" in text and "suggested CORE" in text and "estimate" in text
    assert '"search" = [' in text and "find the report" in text
    report = analyse(UsageData())
    assert report["core"]["names"] == [] and report["examples"]["toml"] is None
    assert "TOOLPRUNE_USAGE_STORE_TEXT" in format_report(report)


# --------------------------------------------------------------------------- usage_log helpers


def test_parse_since() -> None:
    assert parse_since("7d", now=10 * DAY) == 3 * DAY
    assert parse_since("12h", now=DAY) == DAY / 2
    assert parse_since("2w", now=20 * DAY) == 6 * DAY
    assert parse_since("1970-01-02") == DAY
    assert parse_since("1970-01-01T01:00:00+01:00") == 0.0
    for bad in ("yesterday", "7x", "-3d", ""):
        with pytest.raises(ValueError):
            parse_since(bad)


def test_history_calls_keys_turns_and_preceding_user_text() -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
            {"type": "function", "function": {"name": "pwd", "arguments": "{}"}},
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": "a b"},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": [{"type": "text", "text": "now read a"}]},
        {"role": "assistant", "content": '<tool_call>{"name": "cat"}</tool_call>',
         "function_call": {"name": "legacy", "arguments": "{}"}},
    ]
    found = [(c.key, c.tool, c.turn, c.user_text) for c in history_calls(messages, None)]
    assert found == [
        ("id:c1", "ls", 1, "list files"),
        ("m2:1", "pwd", 1, "list files"),
        ("m6:f", "legacy", 3, "now read a"),
    ]
    with_text = history_calls(messages, {"cat", "ls"})
    assert [(c.key, c.tool) for c in with_text][-1] == ("m6:t:cat", "cat")


def test_retention_on_open_and_periodically(tmp_path: Path) -> None:
    db = tmp_path / "usage.db"
    now = [100 * DAY]
    log = UsageLog(db, retention_days=30, retention_interval_s=0.0, clock=lambda: now[0])
    log.record_fallback("embedder_error")
    assert log.flush(10)
    with sqlite3.connect(db) as connection:  # rows as an older proxy would have left them
        connection.execute("INSERT INTO calls (ts, conversation, tool, turn, status, source, catalog) "
                           "VALUES (?, 'c', 't', 1, 'history', 'history', 'old')", (now[0] - 40 * DAY,))
        connection.execute("INSERT INTO examples (ts, conversation, tool, text) VALUES (?, 'c', 't', 'x')",
                           (now[0] - 40 * DAY,))
        connection.execute("INSERT INTO catalog_tools (catalog, position, tool, size_bytes, ts) "
                           "VALUES ('old', 0, 't', 10, ?)", (now[0] - 40 * DAY,))
    assert log.close()
    reopened = UsageLog(db, retention_days=30, clock=lambda: now[0])  # retention on open
    assert reopened.flush(10)
    data = read_usage(db)
    assert data.calls == [] and data.examples == [] and len(data.requests) == 1
    with sqlite3.connect(db) as connection:
        assert connection.execute("SELECT count(*) FROM catalog_tools").fetchone() == (0,)
    assert reopened.close()
    # Periodically, while running: a later batch deletes what aged past the period.
    log = UsageLog(db, retention_days=30, retention_interval_s=0.0, clock=lambda: now[0])
    now[0] += 31 * DAY
    log.record_fallback("embedder_timeout")
    assert log.flush(10)
    assert [r.reason for r in read_usage(db).requests] == ["embedder_timeout"]
    assert log.close()


def test_apply_retention_keeps_catalogues_still_in_use(tmp_path: Path) -> None:
    db = tmp_path / "usage.db"
    UsageLog(db).close()
    connection = sqlite3.connect(db, isolation_level=None)
    connection.execute("INSERT INTO requests (ts, decision, catalog) VALUES (50, 'pruned', 'kept')")
    connection.execute("INSERT INTO requests (ts, decision, catalog) VALUES (5, 'pruned', 'gone')")
    for catalog in ("kept", "gone"):
        connection.execute("INSERT INTO catalog_tools (catalog, position, tool, size_bytes, ts) "
                           "VALUES (?, 0, 't', 1, 0)", (catalog,))
    apply_retention(connection, 10)
    assert connection.execute("SELECT catalog FROM catalog_tools").fetchall() == [("kept",)]
    connection.close()


def test_a_closed_log_drops_and_counts() -> None:
    log = UsageLog(":memory:")
    assert log.close()
    log.record_fallback("x")
    assert log.dropped == 1
