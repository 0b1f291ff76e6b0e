"""``toolprune eval --live`` against a scripted model on a real loopback server
(:class:`tests.support.labelled_model.LabelledModel` behind the scripted upstream): every
outcome made to occur on purpose and counted, a shipped case set reconciled with the
offline ``toolprune eval``, a run resumed from its results file.

Each conversation of these sets gets a system message of its own: distinct agents, so that
no conversation starts from the block the previous one left (what ``toolprune serve`` does
for conversations of one agent, and the live run with it), as the offline eval's do not.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.support.data import BFCL_TRADINGBOT
from benchmarks.support.servers import free_port, serve_in_thread
from benchmarks.support.upstream import Upstream
from proxy.cli import main as cli
from selection.evaluation import load_cases
from tests.support.labelled_model import LabelledModel, Want, conversation_key

OUTCOMES = ("correct", "recovered_by_search", "selection_error", "retrieval_miss", "errors")


def _tool(name: str, description: str) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": {"id": {"type": "string"}},
                       "required": ["id"]}}}


TOOLS = [
    _tool("get_weather_forecast", "Weather forecast for a city: temperature, rain and wind for "
          "the coming days."),
    _tool("send_email", "Send an email message to a recipient with a subject and a body."),
    _tool("refund_payment", "Refund a card payment to the customer, fully or in part."),
    _tool("create_invoice", "Create a new invoice for a customer with line items and a due date."),
    _tool("send_invoice_reminder", "Remind a customer by email that an invoice is due or overdue."),
    _tool("rotate_api_key", "Revoke the current API key of a project and issue a new one."),
    _tool("translate_text", "Translate a text into another language."),
    _tool("book_restaurant", "Book a table at a restaurant for a number of people at a given time."),
    _tool("list_calendar_events", "List the events of the user's calendar between two dates."),
    _tool("play_music", "Play a song, an album or a playlist on the user's speakers."),
    _tool("get_stock_price", "Current price of a stock by its ticker symbol."),
    _tool("convert_currency", "Convert an amount of money from one currency into another."),
]
#: (id, the user's words, the label, what the scripted model does). With top-k 2, no tier
#: and search_tools for this catalogue, each case's toolprune outcome is its id.
CASES = [
    ("correct", "What is the weather forecast for Paris tomorrow?", "get_weather_forecast",
     Want("get_weather_forecast")),
    # The words point at invoices; the model knows it must refund, and searches for it.
    ("recovered_by_search", "Please handle the thing for invoice 881 as we discussed.",
     "refund_payment", Want("refund_payment", search="refund a card payment")),
    # The tool is there; the model answers in text.
    ("selection_error", "Send an email to Bob saying the meeting moved to Friday.",
     "send_email", Want(None)),
    # Nothing points at the tool, and the model's searches look elsewhere.
    ("retrieval_miss", "Can you help me with the thing from earlier?", "rotate_api_key",
     Want("rotate_api_key", search="weather forecast")),
    ("errors", "Translate this page into French.", "translate_text",
     Want("translate_text", fail=500)),
    # All twelve tools overflow the server's context; toolprune's block fits.
    ("direct_overflow", "Book a table for two at 8pm tonight.", "book_restaurant",
     Want("book_restaurant", overflow_above=5)),
]


@pytest.fixture
def crafted(tmp_path: Path) -> tuple[Path, dict[str, Want]]:
    """The crafted set's folder and the scripted model's wants."""
    folder = tmp_path / "crafted"
    folder.mkdir()
    (folder / "tools.json").write_text(json.dumps(TOOLS))
    wants = {}
    with (folder / "cases.jsonl").open("w") as handle:
        for case_id, words, expected, want in CASES:
            messages = [{"role": "system", "content": f"You are agent {case_id}."},
                        {"role": "user", "content": words}]
            handle.write(json.dumps({"id": case_id, "messages": messages,
                                     "catalog": "tools.json", "expected": [expected]}) + "\n")
            wants[conversation_key(messages)] = want
    return folder, wants


@pytest.fixture
def model_server() -> Iterator[tuple[Upstream, str]]:
    upstream = Upstream()
    with serve_in_thread(upstream.app) as origin:
        yield upstream, origin + "/v1"


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert cli.main(["eval", *argv, "--json", "--no-progress"]) == 0
    return json.loads(capsys.readouterr().out)


def counts(row: dict[str, Any]) -> dict[str, int]:
    return {name: row[name] for name in OUTCOMES}


@pytest.mark.parametrize("late_tools", ["block", "conversation"])
def test_each_outcome_occurs_on_purpose(
    crafted: tuple[Path, dict[str, Want]], model_server: tuple[Upstream, str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], late_tools: str,
) -> None:
    """Found tools join the block, or (``conversation``: a server that caches the prompt's
    prefix) are delivered in the conversation and called through the ``call_tool`` bridge,
    which the client gets as the tool's own call."""
    folder, wants = crafted
    upstream, base_url = model_server
    upstream.behaviour = LabelledModel(wants)
    monkeypatch.setenv("TOOLPRUNE_LATE_TOOLS", late_tools)
    monkeypatch.setenv("TOOLPRUNE_TIER_SIZE", "0")
    monkeypatch.setenv("TOOLPRUNE_SEARCH_TOOLS_MIN_CATALOG", "5")
    plot = tmp_path / "live.png"
    report = run_json(capsys, str(folder), "--live", base_url, "--top-k", "2", "--misses",
                      "--plot", str(plot))
    (live,) = report["sets"]
    assert counts(live["toolprune"]) == {"correct": 2, "recovered_by_search": 1,
                                         "selection_error": 1, "retrieval_miss": 1, "errors": 1}
    assert counts(live["direct"]) == {"correct": 3, "recovered_by_search": 0,
                                      "selection_error": 1, "retrieval_miss": 0, "errors": 2}
    outcomes = {m["id"]: (m["direct"]["outcome"], m["toolprune"]["outcome"])
                for m in live["misses"]}
    assert outcomes == {"recovered_by_search": ("correct", "recovered_by_search"),
                        "retrieval_miss": ("correct", "retrieval_miss"),
                        "direct_overflow": ("errors", "correct")}
    overflow = next(m for m in live["misses"] if m["id"] == "direct_overflow")
    assert overflow["direct"]["error"].startswith("overflow:")
    for via in ("direct", "toolprune"):
        assert sum(counts(live[via]).values()) == live[via]["cases"] == len(CASES)
        assert live[via]["end_to_end"] == pytest.approx(3 / 6)
        low, high = live[via]["end_to_end_ci"]
        assert low < 0.5 < high
    assert live["difference"]["end_to_end"] == 0.0
    assert (live["difference"]["only_toolprune_right"], live["difference"]["only_direct_right"]) \
        == (1, 1)
    assert report["config"]["model"] == "test-model"  # the first the server lists
    assert plot.stat().st_size > 0
    offered = [{t["function"]["name"] for t in r.json().get("tools", [])}
               for r in upstream.requests if r.path.endswith("/chat/completions")]
    assert any("call_tool" in names for names in offered) == (late_tools == "conversation")


def tradingbot_as_distinct_agents(folder: Path) -> Path:
    """The shipped BFCL TradingBot set, each conversation given its own system message."""
    shutil.copytree(BFCL_TRADINGBOT, folder)
    path = folder / "cases.jsonl"
    lines = []
    for line in path.read_text().splitlines():
        case = json.loads(line)
        case["messages"] = [{"role": "system", "content": f"Session {case['source_id']}."},
                            *case["messages"]]
        lines.append(json.dumps(case))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_shipped_set_reconciles_with_the_offline_eval(
    model_server: tuple[Upstream, str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """A model that calls what each case expects: directly every case is right; through
    toolprune, right at once where the offline eval forwarded the tool, recovered where one
    meta round reaches it (its name in load_tools' menu), missed elsewhere."""
    path = tradingbot_as_distinct_agents(tmp_path / "tradingbot")
    cases = load_cases(path).cases
    assert all(len(case.requirements) == 1 for case in cases)  # recall counts cases then
    upstream, base_url = model_server
    upstream.behaviour = LabelledModel(
        {conversation_key(case.messages): Want(case.requirements[0][0]) for case in cases},
        timings=True)
    live = run_json(capsys, str(path), "--live", base_url, "--top-k", "2")["sets"][0]
    offline = run_json(capsys, str(path), "--k", "2", "--no-bm25", "--misses")["sets"][0]
    (at_2,) = next(m for m in offline["methods"] if m["method"] == "toolprune")["ks"]
    forwarded = round(at_2["recall"] * at_2["requirements"])
    reachable = round(at_2["reachable"] * at_2["requirements"])
    assert 0 < forwarded < reachable < len(cases)  # each kind of case occurs
    assert live["direct"]["end_to_end"] == 1.0
    assert counts(live["toolprune"]) == {
        "correct": forwarded, "recovered_by_search": reachable - forwarded,
        "selection_error": 0, "retrieval_miss": len(cases) - reachable, "errors": 0}
    # The server's timings, over every round the proxy sent (hidden ones too).
    rounds = [r for r in upstream.requests if r.path.endswith("/chat/completions")]
    through = [r for r in rounds if (r.header("x-request-id") or "").startswith("eval-")]
    direct = [r for r in rounds if r.header("x-request-id") is None]
    # A recovery costs one round more; a miss none (the model sees no way to its tool).
    assert len(through) == len(cases) + live["toolprune"]["recovered_by_search"]
    for via, sent in (("toolprune", through), ("direct", direct)):
        assert live[via]["timed_by"] == "timings"
        assert live[via]["prompt_tokens_mean"] == pytest.approx(
            sum(len(r.body) // 4 for r in sent) / len(cases))
    assert live["toolprune"]["prompt_tokens_mean"] < live["direct"]["prompt_tokens_mean"]


def test_a_run_goes_on_from_its_results_file(
    crafted: tuple[Path, dict[str, Want]], model_server: tuple[Upstream, str], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder, wants = crafted
    upstream, base_url = model_server
    upstream.behaviour = LabelledModel(wants)
    results = tmp_path / "results.jsonl"
    first = run_json(capsys, str(folder), "--live", base_url, "--results", str(results))
    lines = results.read_text().splitlines()
    assert len(lines) == 1 + len(CASES)  # the run's config, then one record per case
    # Interrupted after two cases, the third cut off mid-line:
    results.write_text("\n".join(lines[:3]) + "\n" + lines[3][:20])
    sent = len(upstream.requests)
    again = run_json(capsys, str(folder), "--live", base_url, "--results", str(results))
    direct_sent = [r for r in upstream.requests[sent:]
                   if r.path.endswith("/chat/completions") and r.header("x-request-id") is None]
    assert len(direct_sent) == len(CASES) - 2
    for via in ("direct", "toolprune"):
        assert counts(again["sets"][0][via]) == counts(first["sets"][0][via])
    # A results file of another model is refused, and kept as it is.
    before = results.read_text()
    assert cli.main(["eval", str(folder), "--live", base_url, "--model", "another",
                     "--results", str(results)]) == 2
    assert "other model" in capsys.readouterr().err
    assert results.read_text() == before


def test_offline_options_are_refused_with_live(
    crafted: tuple[Path, dict[str, Want]], capsys: pytest.CaptureFixture[str],
) -> None:
    folder, _ = crafted
    assert cli.main(["eval", str(folder), "--live", "http://127.0.0.1:9/v1", "--k", "2"]) == 2
    assert "--k do(es) not apply to --live" in capsys.readouterr().err


def test_a_server_that_does_not_answer_is_a_clear_error(
    crafted: tuple[Path, dict[str, Want]], capsys: pytest.CaptureFixture[str],
) -> None:
    folder, _ = crafted
    base_url = f"http://127.0.0.1:{free_port()}/v1"
    assert cli.main(["eval", str(folder), "--live", base_url]) == 2
    assert f"{base_url}/models did not answer (ConnectError): give the model with --model" \
        in capsys.readouterr().err
