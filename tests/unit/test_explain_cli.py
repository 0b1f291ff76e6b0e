"""`toolprune explain`: the proxy's selection, offline, on one request body."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.support.data import REAL_CATALOGS
from proxy.cli.main import main

PLAYWRIGHT = json.loads((REAL_CATALOGS / "playwright_mcp.json").read_text())


def write(tmp_path: Path, body: object) -> str:
    path = tmp_path / "request.json"
    path.write_text(json.dumps(body))
    return str(path)


def test_explain_reports_forwarded_tools_reasons_left_out_and_saving(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    called = {"id": "c1", "type": "function", "function": {"name": "browser_pdf_save", "arguments": "{}"}}
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "Take a screenshot of the current page"},
            {"role": "assistant", "content": None, "tool_calls": [called]},
            {"role": "tool", "tool_call_id": "c1", "content": "saved"},
        ],
        "tools": PLAYWRIGHT,
    }
    assert main(["explain", write(tmp_path, body), "--json", "--top-k", "3"]) == 0
    explained = json.loads(capsys.readouterr().out)
    reasons = {tool["name"]: tool["reason"] for tool in explained["tools"]}
    assert reasons["browser_pdf_save"] == "pinned"
    assert reasons["browser_take_screenshot"] == "semantic"
    # top-k 3 is a token budget (3 × the catalogue's mean tool tokens): the best match is
    # always admitted, others while they fit; the next best are the meta-tool's tier.
    semantic = sum(reason == "semantic" for reason in reasons.values())
    assert 1 <= semantic <= 3
    assert (explained["forwarded"], explained["offered"]) == (1 + semantic, 69)
    assert len(explained["tier"]) == 8 and not set(explained["tier"]) & set(reasons)
    assert explained["meta_tools"] == ["load_tools"]
    assert len(explained["left_out"]) == 5
    left_out_names = {tool["name"] for tool in explained["left_out"]}
    assert not left_out_names & set(reasons)
    assert explained["schema_bytes_saved"] > 0


def test_explain_says_when_nothing_would_be_pruned(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    small = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": PLAYWRIGHT[:3]}
    assert main(["explain", write(tmp_path, small), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "api": "chat_completions", "decision": "small_catalog", "offered": 3,
        "reason": "at most min_catalog_tools tools",
    }


def test_explain_says_when_pruning_would_save_too_little(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Twelve tools with one-word descriptions: eight of them and the meta-tool's menu
    would cost about as much as all twelve, so the catalogue is forwarded whole."""
    tiny = [{"type": "function", "function": {"name": f"tool_{i}", "description": "Does it."}}
            for i in range(12)]
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": tiny}
    assert main(["explain", write(tmp_path, body), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "api": "chat_completions", "decision": "small_catalog", "offered": 12,
        "reason": "pruning would save less than min_saving of its tool tokens",
    }


GITHUB = json.loads((REAL_CATALOGS / "github_mcp_server.json").read_text())


@pytest.mark.parametrize(
    ("settings", "forwarded"),
    [({}, ["list_pull_requests"]),
     ({"TOOLPRUNE_NAME_WEIGHT": "0"}, ["list_pull_requests"]),  # the score off, the rule on
     ({"TOOLPRUNE_NAMED_ONLY": "false"}, None)],
)
def test_the_name_score_and_the_named_only_rule_are_switched_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    settings: dict[str, str], forwarded: list[str] | None,
) -> None:
    """A one-intent request that names a tool gets it alone (``named_only``) whatever the
    name signal's weight; ``TOOLPRUNE_NAME_WEIGHT=0`` only takes its score out of the
    ranking, ``TOOLPRUNE_NAMED_ONLY=false`` only the rule."""
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    body = {"model": "m", "messages": [{"role": "user", "content": "List the open pull requests"}],
            "tools": GITHUB}
    assert main(["explain", write(tmp_path, body), "--json"]) == 0
    explained = json.loads(capsys.readouterr().out)
    names = [tool["name"] for tool in explained["tools"]]
    reasons = {tool["name"]: tool["reason"] for tool in explained["tools"]}
    if forwarded is not None:
        assert names == forwarded and reasons["list_pull_requests"] == "named"
    else:  # the rule off: the pull-request tools the ranking wants, none of them "named"
        assert len(names) > 1 and "list_pull_requests" in names
        assert "named" not in reasons.values()


def test_explain_says_a_body_the_api_refuses_is_malformed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = {"model": "m", "messages": "hi", "tools": PLAYWRIGHT}
    assert main(["explain", write(tmp_path, body), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "api": "chat_completions", "decision": "malformed", "reason": "messages is not a list",
    }


def test_explain_says_the_proxy_would_forward_an_unreadable_catalogue_unchanged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The server forwards a request whose ``tools`` it cannot read unchanged
    (``fallback``, ``catalog_error``); explain says so instead of failing."""
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": "all of them"}
    assert main(["explain", write(tmp_path, body), "--json"]) == 0
    explained = json.loads(capsys.readouterr().out)
    assert explained["decision"] == "fallback"
    assert explained["reason"] == "catalog_error"
    assert "array" in explained["detail"]
    # Without --json: one line saying so, not JSON.
    assert main(["explain", write(tmp_path, body)]) == 0
    assert capsys.readouterr().out == (
        "decision: fallback (chat_completions API): forwarded unchanged, "
        "catalog_error: tools is not an array\n"
    )


def test_explain_into_a_pipe_its_reader_closed_exits_without_a_traceback(tmp_path: Path) -> None:
    """``toolprune explain … | head -5``: the reader goes away before the table is written."""
    body = {"model": "m", "messages": [{"role": "user", "content": "Take a screenshot"}],
            "tools": PLAYWRIGHT}
    process = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli.main", "explain", write(tmp_path, body)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # before the embedder has loaded: nothing was read
    errors = process.stderr.read().decode()
    assert process.wait(timeout=300) == 1
    assert "Traceback" not in errors and "BrokenPipeError" not in errors


def test_explain_rejects_a_body_that_is_not_a_json_object(tmp_path: Path) -> None:
    assert main(["explain", write(tmp_path, [1, 2])]) == 2


def test_explain_refuses_a_body_nested_past_the_json_decoders_depth(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 5000 + "]" * 5000)
    assert main(["explain", str(path)]) == 2
    assert "nested too deeply" in capsys.readouterr().err


@pytest.mark.parametrize("top_k", ["-1", "10001", "four"])
def test_explain_refuses_a_top_k_the_header_would_refuse(
    tmp_path: Path, top_k: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["explain", write(tmp_path, {"model": "m", "messages": []}), "--top-k", top_k])
    assert exited.value.code == 2
    assert "--top-k: must be an integer from 0 to 10000" in capsys.readouterr().err


RESPONSES_TOOLS = [{"type": "function", **tool["function"]} for tool in PLAYWRIGHT]
MESSAGES_TOOLS = [
    {"name": t["function"]["name"], "description": t["function"].get("description", ""),
     "input_schema": t["function"]["parameters"]}
    for t in PLAYWRIGHT
]


@pytest.mark.parametrize(
    ("body", "api"),
    [
        ({"model": "m", "input": "Take a screenshot of the current page",
          "tools": [{"type": "web_search"}, *RESPONSES_TOOLS]}, "responses"),
        ({"model": "m", "max_tokens": 64, "tools": MESSAGES_TOOLS,
          "messages": [{"role": "user", "content": "Take a screenshot of the current page"}]},
         "messages"),
    ],
)
def test_explain_reads_responses_and_messages_requests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: dict, api: str
) -> None:
    assert main(["explain", write(tmp_path, body), "--json", "--top-k", "3"]) == 0
    explained = json.loads(capsys.readouterr().out)
    assert explained["api"] == api and explained["offered"] == 69
    reasons = {tool["name"]: tool["reason"] for tool in explained["tools"]}
    assert reasons["browser_take_screenshot"] == "semantic"
    assert explained["meta_tools"] == ["load_tools"]
    assert main(["explain", write(tmp_path, body)]) == 0
    assert f"{api} API" in capsys.readouterr().out


def test_explain_names_the_server_that_matched_and_the_tools_it_brought_in(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    github = json.loads((REAL_CATALOGS / "github_mcp_server.json").read_text())
    tools = []
    for server, catalog in (("github", github), ("playwright", PLAYWRIGHT)):
        for tool in catalog:
            function = {**tool["function"], "name": f"{server}__{tool['function']['name']}"}
            tools.append({**tool, "function": function})
    body = {"model": "m", "tools": tools,
            "messages": [{"role": "user", "content": "Take a screenshot of the current page"}]}
    path = write(tmp_path, body)
    assert main(["explain", path, "--json"]) == 0
    explained = json.loads(capsys.readouterr().out)
    assert explained["groups"][0][0] == "playwright"
    through = explained["through_group"]
    assert through and set(through.values()) <= {"playwright", "github"}
    reasons = {tool["name"]: tool["reason"] for tool in explained["tools"]}
    assert set(through) <= set(reasons)
    assert main(["explain", path]) == 0
    table = capsys.readouterr().out
    assert "groups matched best: playwright (" in table
    assert f"(group {through[next(iter(through))]})" in table
