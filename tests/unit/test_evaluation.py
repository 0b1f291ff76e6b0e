"""Tests for selection.evaluation and ``toolprune eval``: a tiny hand-made data set and a
deterministic fake embedder (one axis per keyword), so every metric is known exactly."""

from __future__ import annotations

import json
import math
import re
import shutil
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from benchmarks.support.data import BFCL_TRADINGBOT
from config.settings import Settings
from proxy.cli import eval as eval_cli
from proxy.cli import main as cli
from selection.catalog.policy import Policy
from selection.evaluation import (
    ALL,
    EngineScorer,
    conversation_key,
    evaluate,
    load_cases,
    parse_ks,
    replay,
    score_cases,
    summarise_k,
)
from selection.ranking.engine import SelectionEngine
from tests.support.selection import PLAIN_SIGNALS

NAMES = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]


class KeywordEmbedder:
    """One axis per keyword in NAMES (counts of whole words), plus a bias axis so a text
    without keywords is a unit vector orthogonal to every tool. Tools without
    description or parameters are indexed by their name only, so cosines are exact:
    "alpha alpha beta" scores alpha 2/√5, beta 1/√5, every other tool 0."""

    def __init__(self) -> None:
        self.calls = 0

    @property
    def id(self) -> str:
        return "fake:keywords"

    @property
    def ready(self) -> bool:
        return True

    async def load(self) -> None:
        return None

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(texts), len(NAMES) + 1), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z]+", text.lower()):
                if word in NAMES:
                    out[row, NAMES.index(word)] += 1.0
            if not out[row].any():
                out[row, -1] = 1.0
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    async def aclose(self) -> None:
        return None


def tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {}}}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def call(name: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": name, "arguments": "{}"}}],
    }


#: (id, messages, expected, extra keys). Ranks with τ = 0.1 and one user message:
#: A alpha 1 · B beta 2 · C kappa 10 (0 like 8 tools before it, gamma above) · D none ·
#: E any-of delta|epsilon 1 · G alpha 1, beta 2 · conversation "conv": call0 theta 1,
#: call1 theta 9 (query "iota"; sticky from call0), call2 eta 8 (query "kappa"; pinned:
#: called in the history). The conversation's messages are three words long: a shorter one
#: would be a fragment, read with the message before it (:mod:`selection.conversation.query`).
CONVERSATION = [
    ("conv_call0", [user("please use theta")], ["theta"], {}),
    ("conv_call1", [user("please use theta"), {"role": "assistant", "content": "ok"}, user("please use iota")], ["theta"], {}),
    (
        "conv_call2",
        [
            user("please use theta"), {"role": "assistant", "content": "ok"}, user("please use iota"),
            call("eta"), {"role": "tool", "tool_call_id": "c1", "content": "done"}, user("please use kappa"),
        ],
        ["eta"],
        {},
    ),
]
CASES = [
    ("A", [user("alpha")], ["alpha"], {}),
    ("B", [user("alpha alpha beta")], ["beta"], {}),
    ("C", [user("gamma")], ["kappa"], {}),
    ("D", [user("nothing to do here")], [], {}),
    ("E", [user("epsilon")], [], {"expected_any_of": [["delta", "epsilon"]]}),
    ("G", [user("alpha")], ["alpha", "beta"], {}),
    *CONVERSATION,
]
#: The tiny tools below cost less whole than pruned (``min_saving``); the metrics need a
#: selection, so they are pruned whatever that costs.
POLICY = Policy(top_k=8, threshold=0.1, max_tools=16, min_catalog_tools=8, min_saving=-math.inf)


def write_set(folder: Path, cases: Sequence[tuple[str, list[Any], list[str], dict[str, Any]]] = CASES) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "catalog.json").write_text(json.dumps([tool(name) for name in NAMES]))
    lines = [
        json.dumps({"id": case_id, "messages": messages, "catalog": "catalog.json", "expected": expected, **extra})
        for case_id, messages, expected, extra in cases
    ]
    path = folder / "cases.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def engine(embedder: KeywordEmbedder | None = None) -> SelectionEngine:
    return SelectionEngine(
        embedder or KeywordEmbedder(), vector_cache_size=1000, index_cache_size=8,
        timeout_s=10, index_timeout_s=10, signals=PLAIN_SIGNALS,
    )


async def run_set(tmp_path: Path, ks: Sequence[int | None] = (1, 2, ALL)) -> dict[str, Any]:
    case_set = load_cases(write_set(tmp_path / "tiny"))
    return await evaluate(case_set, [EngineScorer(engine(), POLICY)], POLICY, ks=ks, query_user_messages=1)


def row(report: dict[str, Any], k: str, method: int = 0) -> dict[str, Any]:
    return next(r for r in report["methods"][method]["ks"] if r["k"] == k)


# --------------------------------------------------------------------------- loading


def test_conversation_key_prefers_source_id_then_strips_step_suffixes() -> None:
    assert conversation_key({"id": "x_t0_s1", "source_id": "multi_turn_base_0"}) == "multi_turn_base_0"
    assert conversation_key({"id": "apibank_1_Foo-level-2-1_call3"}) == "apibank_1_Foo-level-2-1"
    assert conversation_key({"id": "bfcl_multi_turn_base_0_t2_s1"}) == "bfcl_multi_turn_base_0"
    assert conversation_key({"id": "metatool_single_7"}) == "metatool_single_7"


def test_parse_ks_reads_all_and_rejects_zero() -> None:
    assert parse_ks("1, 2,all,2") == (1, 2, ALL)
    with pytest.raises(ValueError):
        parse_ks("0")


def test_load_cases_shares_a_global_catalog_and_reads_any_of(tmp_path: Path) -> None:
    case_set = load_cases(write_set(tmp_path))
    assert len(case_set.cases) == len(CASES) == case_set.total
    assert case_set.cases[0].catalog is case_set.cases[1].catalog  # parsed once
    e = next(c for c in case_set.cases if c.id == "E")
    assert e.requirements == (("delta", "epsilon"),) and not e.expects_none
    assert next(c for c in case_set.cases if c.id == "D").expects_none
    assert case_set.conversations == 7


def test_inline_tools_and_unparseable_catalog_is_passed_through(tmp_path: Path) -> None:
    bad = [tool("alpha"), tool("alpha")]  # duplicate names: the proxy forwards unchanged
    lines = [
        {"id": "inline", "messages": [user("beta")], "tools": [tool(n) for n in NAMES], "expected": ["beta"]},
        {"id": "bad", "messages": [user("alpha")], "tools": bad, "expected": ["alpha"]},
        {"id": "small", "messages": [user("x")], "tools": [tool("alpha")], "expected": ["alpha"]},
    ]
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    case_set = load_cases(path)
    assert case_set.cases[1].catalog is None and case_set.cases[1].tool_names == ("alpha", "alpha")


def test_load_cases_refuses_json_nested_past_the_decoders_depth(tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_text(json.dumps({"id": "ok", "messages": [user("a")], "tools": [tool("alpha")]})
                    + "\n" + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ValueError, match=r"cases.jsonl:2: JSON nested too deeply"):
        load_cases(path)
    (tmp_path / "catalog.json").write_text("[" * 5000 + "]" * 5000)
    path.write_text(json.dumps({"id": "c", "messages": [user("a")], "catalog": "catalog.json"}) + "\n")
    with pytest.raises(ValueError, match="catalog.json: JSON nested too deeply"):
        load_cases(path)


async def test_small_and_unparseable_catalogs_forward_everything(tmp_path: Path) -> None:
    lines = [
        {"id": "bad", "messages": [user("alpha")], "tools": [tool("alpha"), tool("alpha")], "expected": ["alpha"]},
        {"id": "small", "messages": [user("zzz")], "tools": [tool("alpha"), tool("beta")], "expected": ["beta"]},
    ]
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    run = await score_cases(
        load_cases(path).cases, EngineScorer(engine(), POLICY),
        forwards_whole=POLICY.forwards_whole, query_user_messages=2, query_chars=4000,
    )
    assert [c.mode for c in run.cases] == ["fallback", "small"]
    outcomes = replay(run, POLICY, 1)
    assert [o.forwarded for o in outcomes] == [["alpha", "alpha"], ["alpha", "beta"]]
    assert summarise_k(outcomes, 1)["recall"] == 1.0


def test_limit_samples_whole_conversations(tmp_path: Path) -> None:
    path = write_set(tmp_path)
    for seed in range(6):
        case_set = load_cases(path, limit=2, seed=seed)
        ids = [c.id for c in case_set.cases]
        assert len(ids) >= 2 and case_set.total == len(CASES)
        steps = [i for i in ids if i.startswith("conv_")]
        assert steps in ([], ["conv_call0", "conv_call1", "conv_call2"])
        assert ids == sorted(ids, key=[c[0] for c in CASES].index)  # file order kept


# --------------------------------------------------------------------------- metrics


async def test_recall_all_and_mrr_at_k_are_exact(tmp_path: Path) -> None:
    report = await run_set(tmp_path)
    k1 = row(report, "1")
    assert k1["cases"] == 8 and k1["requirements"] == 9
    # hits at k=1: A, E, G-alpha, conv0 (semantic), conv1 (sticky), conv2 (pinned)
    assert k1["recall"] == pytest.approx(6 / 9)
    assert k1["recall_macro"] == pytest.approx((1 + 0 + 0 + 1 + 0.5 + 1 + 1 + 1) / 8)
    assert k1["all"] == pytest.approx(5 / 8)
    assert k1["mrr_at_k"] == pytest.approx(4 / 8)  # A, E, G, conv0 have their tool at rank 1
    k2 = row(report, "2")
    assert k2["recall"] == pytest.approx(7 / 9)  # B's beta now in; G's beta scores 0 < τ
    assert k2["all"] == pytest.approx(6 / 8)
    assert k2["mrr_at_k"] == pytest.approx((4 + 0.5) / 8)
    everything = row(report, "all")
    assert everything["recall"] == pytest.approx(7 / 9)  # τ keeps zero-score tools out
    assert everything["mrr_at_k"] == pytest.approx(
        (1 + 1 / 2 + 1 / 10 + 1 + 1 + 1 + 1 / 9 + 1 / 8) / 8
    )
    assert report["methods"][0]["mrr"] == pytest.approx(everything["mrr_at_k"])


async def test_forwarded_means_count_sticky_and_pinned_tools(tmp_path: Path) -> None:
    k1 = row(await run_set(tmp_path), "1")
    # A B C E G conv0: 1 each; conv1: theta (sticky) + iota; conv2: theta, iota, eta, kappa
    assert k1["forwarded_mean"] == pytest.approx((6 * 1 + 2 + 4) / 8)
    assert k1["forwarded_max"] == 4


async def test_misses_record_the_rank_the_expected_tool_had(tmp_path: Path) -> None:
    report = await run_set(tmp_path)
    k1 = row(report, "1")
    assert sorted((m["id"], m["expected"][0], m["rank"]) for m in k1["miss_list"]) == [
        ("B", "beta", 2), ("C", "kappa", 10), ("G", "beta", 2),
    ]
    assert k1["misses"] == 3 and k1["miss_rank_p50"] == 2 and k1["miss_unranked"] == 0
    assert [(m["id"], m["rank"]) for m in row(report, "all")["miss_list"]] == [("C", 10), ("G", 2)]


async def test_expected_none_cases_are_reported_apart(tmp_path: Path) -> None:
    report = await run_set(tmp_path)
    for k in ("1", "2", "all"):
        r = row(report, k)
        assert r["none_cases"] == 1 and r["cases"] == 8
        assert r["none_forwarded_mean"] == 0.0 and r["none_forwarded_zero"] == 1.0
    # without τ, the same case forwards k tools for nothing
    case_set = load_cases(write_set(tmp_path / "again"))
    loose = replace(POLICY, threshold=-1.0)
    report = await evaluate(case_set, [EngineScorer(engine(), loose)], loose, ks=(2,), query_user_messages=1)
    assert row(report, "2")["none_forwarded_mean"] == 2.0


async def test_state_is_carried_per_conversation_so_sticky_and_pinned_tools_count(tmp_path: Path) -> None:
    case_set = load_cases(write_set(tmp_path))
    run = await score_cases(
        case_set.cases, EngineScorer(engine(), POLICY),
        forwards_whole=POLICY.forwards_whole, query_user_messages=1, query_chars=4000,
    )
    outcomes = {o.case.case.id: o for o in replay(run, POLICY, 1)}
    assert outcomes["conv_call0"].forwarded == ["theta"]
    assert outcomes["conv_call1"].forwarded == ["theta", "iota"]  # sticky, then semantic
    assert outcomes["conv_call1"].satisfied == [True]
    assert outcomes["conv_call2"].forwarded == ["theta", "iota", "eta", "kappa"]
    assert run.cases[-1].pinned == ["eta"]  # called in the history: pinned
    assert outcomes["conv_call2"].satisfied == [True]
    # single-turn cases start from an empty state each
    assert outcomes["G"].forwarded == ["alpha"]


async def test_latency_and_embedding_time_are_reported(tmp_path: Path) -> None:
    method = (await run_set(tmp_path))["methods"][0]
    assert method["latency_cases"] == len(CASES)
    assert method["latency_ms_p50"] > 0 and method["latency_ms_p99"] >= method["latency_ms_p50"]
    assert method["index_embedding_s"] > 0 and method["query_embedding_s"] > 0
    assert method["modes"] == {"select": len(CASES)}


# --------------------------------------------------------------------------- CLI


def test_cli_eval_json_smoke(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    created: list[KeywordEmbedder] = []

    def factory(settings: Settings, client: httpx.AsyncClient) -> KeywordEmbedder:
        created.append(KeywordEmbedder())
        return created[-1]

    monkeypatch.setattr(eval_cli, "default_embedder_factory", factory)
    monkeypatch.setenv("TOOLPRUNE_MIN_SAVING", "-inf")  # as POLICY
    path = write_set(tmp_path / "tiny")
    status = cli.main([
        "eval", str(path), "--json", "--misses", "--k", "1,2,all", "--threshold", "0.1",
        "--query-user-messages", "1", "--no-progress",
    ])
    assert status == 0 and len(created) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["config"]["threshold"] == 0.1 and report["config"]["ks"] == ["1", "2", "all"]
    (tiny,) = report["sets"]
    assert tiny["set"] == "tiny" and tiny["cases"] == len(CASES)
    assert [m["method"] for m in tiny["methods"]] == ["toolprune", "dense", "oracle", "bm25"]
    assert row(tiny, "1")["recall"] == pytest.approx(6 / 9)
    assert row(tiny, "2")["all"] == pytest.approx(6 / 8)
    assert math.isclose(row(tiny, "1")["mrr_at_k"], 0.5)
    assert [m["rank"] for m in row(tiny, "1")["miss_list"]] == [2, 10, 2]
    bm25 = row(tiny, "all", method=3)
    assert bm25["recall"] == 1.0  # BM25 ranks every tool: k = all forwards everything


def test_cli_eval_table_and_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(eval_cli, "default_embedder_factory", lambda s, c: KeywordEmbedder())
    path = write_set(tmp_path / "tiny")
    assert cli.main(["eval", str(path), "--k", "1,all", "--no-bm25", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "tiny: 9 cases" in out and "recall" in out and "latency" in out
    assert cli.main(["eval", str(tmp_path / "missing.jsonl"), "--no-progress"]) == 2


def test_cli_eval_takes_a_sets_folder_as_the_data_readme_lays_them_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``toolprune eval DATA/<set>``: a set's folder (its ``cases.jsonl``, catalogues
    beside it) is read as its ``cases.jsonl``; a folder without one is one line saying
    what the command takes."""
    monkeypatch.setattr(eval_cli, "default_embedder_factory", lambda s, c: KeywordEmbedder())
    folder = tmp_path / "data" / "tradingbot"
    shutil.copytree(BFCL_TRADINGBOT, folder)  # cases.jsonl and catalogs/, as a set is laid out
    assert cli.main(["eval", str(folder), "--json", "--k", "4", "--no-bm25", "--no-progress"]) == 0
    (report,) = json.loads(capsys.readouterr().out)["sets"]
    total = sum(1 for line in (BFCL_TRADINGBOT / "cases.jsonl").read_text().splitlines() if line.strip())
    assert report["set"] == "tradingbot" and report["cases"] == total
    empty = tmp_path / "data" / "empty"
    empty.mkdir()
    assert cli.main(["eval", str(empty), "--no-progress"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "cases.jsonl" in error and str(empty) in error
    assert "Errno" not in error


# --------------------------------------------------------------------------- the proxy's path


async def test_replay_forwards_what_the_proxy_planner_forwards(tmp_path: Path) -> None:
    """The evaluation replays the proxy's steps; at the policy's k its forwarded lists
    must equal ``Planner.plan``'s for the same requests and conversation ids. Each
    conversation is its agent's first (the evaluation measures selection, not a new
    conversation starting from its agent's last block): here, one model name each."""
    from proxy.metrics import Metrics
    from proxy.state.store import MemoryStateStore
    from proxy.turn.planner import Planner
    from selection.errors import SmallCatalog
    from selection.planning import Selector, SelectorSettings
    from tests.support.chat_planning import ChatPlanner

    extra = [
        ("small", [user("alpha")], ["alpha"], {}),  # one-tool catalogue: passed through
    ]
    path = write_set(tmp_path / "tiny", CASES)
    lines = path.read_text().splitlines()
    lines.append(json.dumps({"id": "small", "messages": extra[0][1], "tools": [tool("alpha")], "expected": ["alpha"]}))
    path.write_text("\n".join(lines) + "\n")
    case_set = load_cases(path)
    policy = replace(POLICY, top_k=2, max_tools=3)

    run = await score_cases(
        case_set.cases, EngineScorer(engine(), POLICY),
        forwards_whole=policy.forwards_whole, query_user_messages=1, query_chars=4000,
    )
    replayed = [o.forwarded for o in replay(run, replace(policy, top_k=2), 2)]

    clock = iter(range(1, 1000))
    selector = Selector(engine(), policy, SelectorSettings(query_user_messages=1),
                        clock=lambda: float(next(clock)))
    planner = ChatPlanner(Planner(
        settings=Settings(query_user_messages=1), selector=selector,
        store=MemoryStateStore(3600, 100), metrics=Metrics(), on_late_error=lambda error: None,
    ))
    planned = []
    for case in case_set.cases:
        body = {
            "model": case.conversation, "messages": case.messages,
            "tools": [tool(n) for n in case.tool_names],
        }
        try:
            turn = await planner.plan(body, [(b"x-conversation-id", case.conversation.encode())])
        except SmallCatalog:
            planned.append(list(case.tool_names))
            continue
        planned.append([t.name for t in turn.plan.selection.tools])
    assert replayed == planned


async def test_score_distribution_separates_expected_other_and_no_tool_cases(tmp_path: Path) -> None:
    scores = (await run_set(tmp_path))["methods"][0]["scores"]
    # expected: A 1, B 1/√5, C 0, E 1, G 1 and 0, conv 1, 0, 0
    assert scores["n_expected"] == 9 and scores["n_none"] == 1
    assert scores["expected"]["p50"] == pytest.approx(0.447, abs=1e-3)
    assert scores["expected_below"]["0.1"] == pytest.approx(4 / 9)
    assert scores["none_best"]["p50"] == 0.0


def test_cli_eval_plot_draws_recall_and_tokens_per_method(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(eval_cli, "default_embedder_factory", lambda settings, client: KeywordEmbedder())
    path = write_set(tmp_path / "tiny")
    image = tmp_path / "selection.png"
    assert cli.main(["eval", str(path), "--k", "1,2,all", "--no-progress", "--plot", str(image)]) == 0
    assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = capsys.readouterr().out
    assert "toolprune" in table and "oracle" in table and "reach" in table


def test_cli_eval_plot_without_matplotlib_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    monkeypatch.setattr(eval_cli, "default_embedder_factory", lambda settings, client: KeywordEmbedder())
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    path = write_set(tmp_path / "tiny")
    status = cli.main(["eval", str(path), "--no-progress", "--plot", str(tmp_path / "x.png")])
    assert status == 2
    assert "pip install 'toolprune[plot]'" in capsys.readouterr().err


async def test_oracle_forwards_the_expected_tools_only_and_reports_their_tokens(tmp_path: Path) -> None:
    report = await run_set(tmp_path)
    oracle = next(m for m in report["methods"] if m["method"] == "oracle")
    toolprune = next(m for m in report["methods"] if m["method"] == "toolprune")
    for row_oracle in oracle["ks"]:
        assert row_oracle["recall"] == 1.0 and row_oracle["reachable"] == 1.0
    k_all = {row["k"]: row for row in toolprune["ks"]}["all"]
    assert k_all["schema_tokens_mean"] >= oracle["ks"][0]["schema_tokens_mean"] > 0


def test_each_method_is_ranked_by_its_own_scores() -> None:
    """MRR and miss ranks are read in the order a method selects by: the fused scores for
    the pipeline, the cosines alone for ``dense``, nothing for the oracle (which ranks no
    tool): not the pipeline's ranks under every method's name."""
    from selection.catalog.catalog import parse_tools
    from selection.evaluation.cases import Case
    from selection.evaluation.methods import METHODS
    from selection.evaluation.replay import method_ranking
    from selection.evaluation.scoring import ScoredCase, requirement_ranks
    from selection.ranking.pipeline import Ranking
    from selection.ranking.signals.base import Contribution

    catalog = parse_tools([{"type": "function", "function": {"name": n}} for n in ("a", "b", "c")])
    case = Case("x", "x", [], catalog, ("a", "b", "c"), (("b",),))
    fused = np.asarray([0.9, 0.5, 0.1], dtype=np.float32)
    cosines = np.asarray([0.2, 0.6, 0.1], dtype=np.float32)
    ranking = Ranking(fused, {"dense": Contribution(cosines)})
    scored = ScoredCase(case, catalog, "select", fused, [], requirement_ranks(case, catalog, fused),
                        ranking=ranking)
    assert method_ranking(scored, METHODS["toolprune"])[1] == [2]
    assert method_ranking(scored, METHODS["dense"])[1] == [1]
    assert method_ranking(scored, METHODS["oracle"])[1] == [None]
