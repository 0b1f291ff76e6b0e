"""Learning from traffic through the real proxy (uvicorn on loopback, the embedded
embedder, the scripted model of test_usage_log) and the real command line: the usage log
keeps query vectors and no text, ``toolprune learn`` judges and reports, ``toolprune
usage report`` shows it, a restarted proxy applies the state in the log, and
``toolprune eval --learn-from`` keeps today's JSON shape (a control: traffic of another
catalogue changes nothing)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from benchmarks.support.data import REAL_CATALOGS
from benchmarks.support.upstream import CHAT_PATH
from proxy.cli.main import main
from proxy.usage.learning import LearnOutcome, read_evidence, record
from selection.learning.learned import learn
from tests.integration.test_usage_log import (
    BFCL,
    REPLAY_SETTINGS,
    bfcl_conversations,
    replay,
    running_proxy,
    steps_of,
    tool_names,
)
from tests.support.logs import Lines

PLAYWRIGHT: list[dict[str, Any]] = json.loads((REAL_CATALOGS / "playwright_mcp.json").read_text())
#: A request whose words do not lead to the tool the agent then used.
QUESTION = "I am done for today, wrap everything up please"
TOOL = "browser_localstorage_clear"
CONTROL_TRAFFIC = [
    ("I am done for today, wrap everything up please", "browser_localstorage_clear"),
    ("show me what the page looks like now", "browser_take_screenshot"),
    ("go back to where we were", "browser_navigate_back"),
    ("save this as a document I can print", "browser_pdf_save"),
]


def test_traffic_is_logged_as_vectors_learned_reported_and_applied(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    log_lines: Lines,
) -> None:
    db = tmp_path / "usage.db"
    conversations = bfcl_conversations()
    catalog = json.loads((BFCL / "catalogs/mt_a27bf63821.json").read_text())
    steps = [step for key in list(conversations)[:8] for step in steps_of(conversations[key])]
    with running_proxy(usage_db=db, learn=True, **REPLAY_SETTINGS) as proxy:
        replay(proxy, steps, catalog)
        proxy.upstream.expect("question-1", [{"id": "q1", "name": TOOL, "arguments": "{}"}])
        body = {"model": "m", "messages": [{"role": "user", "content": QUESTION}], "tools": PLAYWRIGHT}
        assert proxy.post(body, "question-1").status_code == 200
        first = proxy.upstream.requests[-2].json()  # before its load_tools round
        assert TOOL not in tool_names(first["tools"])
        proxy.flush()
    raw = db.read_bytes()
    assert QUESTION.encode() not in raw and steps[0].case["messages"][-1]["content"][:40].encode() not in raw
    with sqlite3.connect(db) as connection:
        stored = connection.execute("SELECT COUNT(query), MIN(LENGTH(query)) FROM requests").fetchone()
    assert stored == (len(steps) + 1, 384 * 2)  # every acting request, float16 of 384 dims

    monkeypatch.setenv("TOOLPRUNE_TOP_K", "2")
    assert main(["learn", "--db", str(db), "--json"]) == 0
    outcomes = {o["tools"]: o for o in json.loads(capsys.readouterr().out)}
    trading = outcomes[len(catalog)]
    assert trading["requests"] == len(steps) and trading["k"] == 2
    assert trading["reason"] in {"promoted", "not_better"}
    # Promoted only with a higher held-back recall@k (and a gain beyond chance).
    assert trading["promoted"] == (trading["reason"] == "promoted")
    assert not trading["promoted"] or trading["after"] > trading["before"]
    assert outcomes[len(PLAYWRIGHT)]["reason"] == "too_little_traffic"

    assert main(["usage", "report", "--db", str(db), "--json", "--no-tokenize"]) == 0
    learning = {row["catalog"]: row for row in json.loads(capsys.readouterr().out)["learning"]}
    assert learning[trading["catalog"]]["last"]["reason"] == trading["reason"]

    # A state for the Playwright catalogue from its one request (promoted by hand: one
    # request is too little for the guard), then a restarted proxy applies it.
    embedder = _embedder_id(db)
    evidence = read_evidence(db, embedder)
    (fingerprint,) = [fp for fp, pairs in evidence.items() if pairs[0].tool == TOOL]
    state = learn(evidence[fingerprint], catalog=fingerprint, embedder=embedder, version=1,
                  created=0.0)
    outcome = LearnOutcome(fingerprint, len(PLAYWRIGHT), 1, 1, 1, 2, 0.0, 1.0, True, "promoted", 1)
    record(db, outcome, state, 0.0)
    with running_proxy(usage_db=db, learn=True, **REPLAY_SETTINGS) as proxy:
        proxy.upstream.expect("question-2", [{"id": "q2", "name": TOOL, "arguments": "{}"}])
        assert proxy.post(body, "question-2").status_code == 200
        chats = [r for r in proxy.upstream.requests if r.path.endswith(CHAT_PATH)]
        assert len(chats) == 1  # no load_tools round this time
        assert TOOL in tool_names(chats[0].json()["tools"])
    assert log_lines.events("pruning_decision")[-1]["reasons"][TOOL] == "learned"


def _embedder_id(db: Path) -> str:
    with sqlite3.connect(db) as connection:
        (value,) = connection.execute(
            "SELECT value FROM meta WHERE key = 'query_embedder'"
        ).fetchone()
    return str(value)


def test_eval_learn_from_keeps_the_shape_and_another_catalogue_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = (BFCL / "cases.jsonl").read_text().splitlines()
    trading = [line for line in lines if '"catalogs/mt_a27bf63821.json"' in line]
    (tmp_path / "catalogs").symlink_to(BFCL / "catalogs")
    held = tmp_path / "held.jsonl"
    held.write_text("\n".join(trading[40:]) + "\n")
    control = tmp_path / "control.jsonl"  # traffic of another catalogue (Playwright MCP)
    control.write_text("".join(
        json.dumps({"id": f"control_{i}", "messages": [{"role": "user", "content": text}],
                    "tools": PLAYWRIGHT, "expected": [tool]}) + "\n"
        for i, (text, tool) in enumerate(CONTROL_TRAFFIC * 3)
    ))
    base = [str(held), "--k", "2,8", "--json", "--no-bm25", "--no-progress",
            "--top-k", "2"]

    def run(*extra: str) -> dict[str, Any]:
        assert main(["eval", *base, *extra]) == 0
        return json.loads(capsys.readouterr().out)

    plain = run()
    controlled = run("--learn-from", str(control))
    assert plain["config"]["learning"] is None
    learning = controlled["config"]["learning"]
    assert learning["traffic"]["requests"] > 0
    assert all(o["catalog"] != _fingerprint_of(held) or not o["promoted"] for o in learning["outcomes"])
    # another catalogue's traffic: nothing changes but the timings
    assert quality(controlled["sets"]) == quality(plain["sets"])

    dev = tmp_path / "dev.jsonl"
    dev.write_text("\n".join(trading[:40]) + "\n")
    learned = run("--learn-from", str(dev))
    assert learned["sets"][0].keys() == plain["sets"][0].keys()
    assert [m["method"] for m in learned["sets"][0]["methods"]] == [
        m["method"] for m in plain["sets"][0]["methods"]
    ]
    (outcome,) = learned["config"]["learning"]["outcomes"]
    assert outcome["requests"] == learned["config"]["learning"]["traffic"]["requests"]
    recall = {m["method"]: m["ks"][0]["recall"] for m in learned["sets"][0]["methods"]}
    before = {m["method"]: m["ks"][0]["recall"] for m in plain["sets"][0]["methods"]}
    assert recall["dense"] == before["dense"]  # the dense anchor never uses learned state
    if not outcome["promoted"]:
        assert recall["toolprune"] == before["toolprune"]


def quality(value: Any) -> Any:
    """``value`` without its timings (keys naming latency or seconds)."""
    if isinstance(value, dict):
        return {k: quality(v) for k, v in value.items()
                if "latency" not in k and not k.endswith("_s")}
    if isinstance(value, list):
        return [quality(v) for v in value]
    return value


def _fingerprint_of(path: Path) -> str:
    from selection.evaluation import load_cases

    (case, *_) = load_cases(path).cases
    assert case.catalog is not None
    return case.catalog.fingerprint

