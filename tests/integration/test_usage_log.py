"""The usage log and ``toolprune usage report`` (issue #8), through the real proxy.

Conversations of BFCL multi-turn (tests/data/bfcl_multi_turn_tradingbot) are replayed step by step through the
proxy (uvicorn on loopback, default embedded embedder) in front of a scripted upstream
that plays the model: it makes the step's ground-truth call when the tool was forwarded,
else asks ``load_tools`` for it first. The log must then hold exactly what was sent, the
report must count it, and the harvested example utterances, adopted in a policy file,
are measured with the project's evaluation code (recall@k before/after).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks.support.data import BFCL_TRADINGBOT, REAL_CATALOGS
from benchmarks.support.servers import serve_in_thread
from benchmarks.support.upstream import CHAT_PATH, Chat, Recorded, Reply, Upstream
from config.policy import load_policy
from config.selector import build_embedder
from config.settings import Settings
from proxy.app import create_app
from proxy.cli.main import main
from proxy.turn.identity import HEADER_ID_PREFIX, log_id
from proxy.usage.reader import read_usage
from proxy.usage.writer import UsageLog
from selection.evaluation import EngineScorer, evaluate, load_cases
from selection.ranking.engine import SelectionEngine
from tests.support.selection import PLAIN_SIGNALS

BFCL = BFCL_TRADINGBOT
PLAYWRIGHT: list[dict[str, Any]] = json.loads((REAL_CATALOGS / "playwright_mcp.json").read_text())
#: One catalogue (TradingBot, 20 tools) and the conversations that use it: the first
#: REPLAYED go through the proxy; the rest are held out for the recall measurement.
CATALOG = "catalogs/mt_a27bf63821.json"
REPLAYED = 12
KS = (1, 2, 4, 8)
FLUSH_TIMEOUT_S = 30.0
#: Proxy settings of the replay: a small top-k, so some steps need ``load_tools``.
REPLAY_SETTINGS: dict[str, Any] = {"top_k": 2, "max_tools": 6}


def tool_names(tools: list[dict[str, Any]]) -> list[str]:
    return [t["function"]["name"] for t in tools]


# --------------------------------------------------------------------------- data


@dataclass
class Step:
    """One replayed request: the case, and the call the scripted model makes."""

    case: dict[str, Any]
    call: dict[str, str]

    @property
    def conversation(self) -> str:
        return str(self.case["source_id"])


def bfcl_conversations() -> dict[str, list[dict[str, Any]]]:
    conversations: dict[str, list[dict[str, Any]]] = defaultdict(list)
    with (BFCL / "cases.jsonl").open() as handle:
        for line in handle:
            case = json.loads(line)
            if case["category"] == "multi_turn_base" and case["catalog"] == CATALOG:
                conversations[case["source_id"]].append(case)
    return dict(conversations)


def steps_of(cases: list[dict[str, Any]]) -> list[Step]:
    """Each step's call, with the id and arguments the next step's history shows for it
    (so a call seen in a response and later in a history is the same call)."""
    steps = []
    for index, case in enumerate(cases):
        (name,) = case["expected"]
        call = {"id": f"{case['id']}_call", "name": name, "arguments": "{}"}
        if index + 1 < len(cases):
            message = cases[index + 1]["messages"][len(case["messages"])]
            (made,) = message["tool_calls"]
            assert made["function"]["name"] == name
            call = {"id": made["id"], "name": name, "arguments": made["function"]["arguments"]}
        steps.append(Step(case, call))
    return steps


@pytest.fixture(scope="module")
def conversations() -> dict[str, list[dict[str, Any]]]:
    return bfcl_conversations()


@pytest.fixture(scope="module")
def catalog_tools() -> list[dict[str, Any]]:
    return json.loads((BFCL / CATALOG).read_text())


# --------------------------------------------------------------------------- servers


class ModelUpstream(Upstream):
    """The scripted model: calls the expected tool when it was forwarded; otherwise asks
    ``load_tools`` for it first (when offered), or calls it anyway (a miss). Records the
    status each call should get in the log."""

    def __init__(self) -> None:
        super().__init__()
        self.expected: list[dict[str, str]] = []
        self.conversation = ""
        self.use_load_tools = True
        self.asked: set[str] = set()
        self.outcomes: list[tuple[str, str, str]] = []  # (conversation, tool, status)

    def expect(self, conversation: str, calls: list[dict[str, str]], *, load: bool = True) -> None:
        self.conversation, self.expected, self.use_load_tools = conversation, calls, load
        self.asked = set()

    def _next_reply(self, record: Recorded) -> Reply:
        if not record.path.endswith(CHAT_PATH) or not self.expected:
            return super()._next_reply(record)
        offered = tool_names(record.json().get("tools", []))
        missing = [c["name"] for c in self.expected if c["name"] not in offered]
        if missing and self.use_load_tools and "load_tools" in offered:
            self.asked.update(missing)
            load = {"id": f"load_{len(self.outcomes)}", "name": "load_tools",
                    "arguments": json.dumps({"names": missing})}
            return Chat(content=None, tool_calls=[load])
        for call in self.expected:
            status = ("loaded" if call["name"] in self.asked
                      else "forwarded" if call["name"] in offered else "miss")
            self.outcomes.append((self.conversation, call["name"], status))
        return Chat(content=None, tool_calls=list(self.expected))


@dataclass
class Proxy:
    """The proxy under test. Every request the tests send is acting or a fallback: one
    usage event each (``posted``)."""

    origin: str
    app: Any
    upstream: ModelUpstream
    posted: int = 0

    @property
    def usage(self) -> UsageLog:
        return self.app.state.services.apis["/v1/chat/completions"].decisions.usage

    def flush(self) -> None:
        """Wait (bounded) until the writer accounted for every request sent: the event is
        queued after the response, so the client may see the response first."""
        assert self.usage.wait_for(self.posted, FLUSH_TIMEOUT_S), "the usage log did not catch up"
        assert self.usage.flush(FLUSH_TIMEOUT_S)

    def post(self, body: dict[str, Any], conversation: str | None = None, **headers: str) -> httpx.Response:
        if conversation is not None:
            headers["X-Conversation-Id"] = conversation
        self.posted += 1
        return httpx.post(self.origin + "/v1/chat/completions", json=body, headers=headers, timeout=60)


@contextmanager
def running_proxy(**settings: Any) -> Iterator[Proxy]:
    upstream = ModelUpstream()
    with ExitStack() as stack:
        origin = stack.enter_context(serve_in_thread(upstream.app))
        app = create_app(Settings(upstream_url=origin + "/v1", index_timeout_s=300.0, **settings))
        proxy_origin = stack.enter_context(serve_in_thread(app, server_header=False, date_header=False))
        yield Proxy(proxy_origin, app, upstream)


def replay(proxy: Proxy, steps: list[Step], tools: list[dict[str, Any]]) -> None:
    for step in steps:
        proxy.upstream.expect(step.conversation, [step.call])
        response = proxy.post({"model": "m", "messages": step.case["messages"], "tools": tools},
                              step.conversation)
        assert response.status_code == 200
        calls = response.json()["choices"][0]["message"]["tool_calls"]
        assert [c["function"]["name"] for c in calls] == [step.call["name"]]


@dataclass
class Replayed:
    db: Path
    steps: list[Step]
    outcomes: list[tuple[str, str, str]]
    held_out: list[Step] = field(default_factory=list)


@pytest.fixture(scope="module")
def replayed(
    tmp_path_factory: pytest.TempPathFactory,
    conversations: dict[str, list[dict[str, Any]]],
    catalog_tools: list[dict[str, Any]],
) -> Replayed:
    """The first REPLAYED conversations of CATALOG through a proxy that stores text."""
    db = tmp_path_factory.mktemp("usage") / "usage.db"
    keys = list(conversations)
    steps = [step for key in keys[:REPLAYED] for step in steps_of(conversations[key])]
    held_out = [step for key in keys[REPLAYED:] for step in steps_of(conversations[key])]
    with running_proxy(usage_db=db, usage_store_text=True, **REPLAY_SETTINGS) as proxy:
        replay(proxy, steps, catalog_tools)
        proxy.flush()
        assert proxy.usage.dropped == 0 and proxy.usage.errors == 0
        outcomes = list(proxy.upstream.outcomes)
    return Replayed(db, steps, outcomes, held_out)


# --------------------------------------------------------------------------- counts


def test_the_log_and_report_count_exactly_what_was_sent(replayed: Replayed, capsys: pytest.CaptureFixture[str]) -> None:
    steps = replayed.steps
    assert main(["usage", "report", "--db", str(replayed.db), "--json", "--no-tokenize"]) == 0
    report = json.loads(capsys.readouterr().out)

    conversations = {step.conversation for step in steps}
    assert report["requests"]["acting"] == report["requests"]["pruned"] == len(steps)
    assert report["requests"]["fallback"] == 0
    assert report["conversations"] == len(conversations)
    # One call per step: each call counted once although later histories repeat it.
    assert report["calls"]["total"] == len(steps)
    assert report["calls"]["history"] == 0
    statuses = Counter(status for _, _, status in replayed.outcomes)
    assert {s: report["calls"][s] for s in ("forwarded", "loaded", "miss")} == {
        s: statuses[s] for s in ("forwarded", "loaded", "miss")
    }
    assert statuses["loaded"] > 0 and statuses["forwarded"] > 0  # both paths were exercised
    assert report["requests"]["meta_calls"] == statuses["loaded"]

    rows = {row["tool"]: row for row in report["tools"]}
    expected_calls = Counter(step.call["name"] for step in steps)
    assert {tool: row["calls"] for tool, row in rows.items()} == dict(expected_calls)
    ranked = [row["calls"] for row in report["tools"]]
    assert ranked == sorted(ranked, reverse=True)
    first_turn: dict[str, dict[str, int]] = defaultdict(dict)
    turn_in_conversation: Counter[str] = Counter()
    for step in steps:
        turn_in_conversation[step.conversation] += 1
        first_turn[step.call["name"]].setdefault(step.conversation, turn_in_conversation[step.conversation])
    for tool, firsts in first_turn.items():
        assert rows[tool]["conversations"] == len(firsts)
        assert rows[tool]["conversation_share"] == pytest.approx(len(firsts) / len(conversations))
        assert rows[tool]["median_first_turn"] == statistics.median(firsts.values())
    for status, column in (("loaded", "loaded"), ("miss", "misses"), ("forwarded", "forwarded")):
        per_tool = Counter(tool for _, tool, s in replayed.outcomes if s == status)
        assert {t: r[column] for t, r in rows.items() if r[column]} == dict(per_tool)


@pytest.mark.parametrize("share", [0.5, 0.9, 1.0])
def test_suggested_core_covers_the_stated_share(replayed: Replayed, capsys: pytest.CaptureFixture[str], share: float) -> None:
    assert main(["usage", "report", "--db", str(replayed.db), "--json", "--no-tokenize",
                 "--core-share", str(share), "--first-turn-share", "1.01"]) == 0
    core = json.loads(capsys.readouterr().out)["core"]
    calls = Counter(step.call["name"] for step in replayed.steps)
    covered = sum(calls[name] for name in core["names"])
    assert covered / sum(calls.values()) >= share
    assert core["covered_calls"] == covered and core["first_turn"] == []
    # Smallest: without its least-called member the set falls short of the share.
    assert sum(calls[name] for name in core["names"][:-1]) / sum(calls.values()) < share
    saving = core["saving"]
    (catalog,) = saving["catalogs"]
    sizes = {t["function"]["name"]: len(json.dumps(t, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode())
             for t in json.loads((BFCL / CATALOG).read_text())}
    assert catalog["requests"] == len(replayed.steps)
    assert catalog["full_bytes"] == sum(sizes.values())
    assert catalog["core_bytes"] == sum(sizes[name] for name in core["names"])
    assert saving["saving_bytes_total"] == (catalog["full_bytes"] - catalog["core_bytes"]) * len(replayed.steps)
    assert saving["tokens"] == "estimate"


def test_first_turn_tools_join_the_core(replayed: Replayed, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["usage", "report", "--db", str(replayed.db), "--json", "--no-tokenize",
                 "--core-share", "0", "--first-turn-share", "0.2"]) == 0
    core = json.loads(capsys.readouterr().out)["core"]
    first: Counter[str] = Counter()
    seen: set[str] = set()
    for step in replayed.steps:
        if step.conversation not in seen:
            seen.add(step.conversation)
            first[step.call["name"]] += 1
    assert core["by_share"] == []
    assert set(core["first_turn"]) == {t for t, n in first.items() if n / len(seen) >= 0.2}
    assert core["first_turn"]


def test_report_counts_tokens_with_the_upstream_tokenizer(replayed: Replayed, capsys: pytest.CaptureFixture[str]) -> None:
    with running_proxy() as proxy:  # its upstream answers /tokenize (one token a word)
        upstream_origin = proxy.app.state.services.settings.upstream_url
        assert main(["usage", "report", "--db", str(replayed.db), "--json", "--upstream", upstream_origin]) == 0
    saving = json.loads(capsys.readouterr().out)["core"]["saving"]
    assert saving["tokens"] == "tokenizer"
    (catalog,) = saving["catalogs"]
    assert 0 < catalog["core_tokens"] < catalog["full_tokens"]
    assert saving["saving_tokens_total"] == (catalog["full_tokens"] - catalog["core_tokens"]) * catalog["requests"]
    # Unreachable tokenizer: silently an estimate.
    assert main(["usage", "report", "--db", str(replayed.db), "--json", "--upstream", "http://127.0.0.1:9"]) == 0
    assert json.loads(capsys.readouterr().out)["core"]["saving"]["tokens"] == "estimate"


def test_terminal_report_and_since(replayed: Replayed, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["usage", "report", "--db", str(replayed.db), "--no-tokenize"]) == 0
    out = capsys.readouterr().out
    assert "suggested CORE" in out and "[examples]" in out and "estimate" in out
    assert main(["usage", "report", "--db", str(replayed.db), "--json", "--no-tokenize", "--since", "2999-01-01"]) == 0
    empty = json.loads(capsys.readouterr().out)
    assert empty["calls"]["total"] == 0 and empty["requests"]["acting"] == 0
    assert main(["usage", "report", "--db", str(replayed.db), "--json", "--no-tokenize", "--since", "1d"]) == 0
    assert json.loads(capsys.readouterr().out)["calls"]["total"] == len(replayed.steps)
    assert main(["usage", "report", "--db", str(replayed.db), "--since", "yesterday"]) == 2


# --------------------------------------------------------------------------- examples and recall


def cases_file(path: Path, steps: list[Step]) -> Path:
    with path.open("w") as handle:
        for step in steps:
            handle.write(json.dumps({**step.case, "catalog": str(BFCL / step.case["catalog"])}) + "\n")
    return path


async def recall_at_k(cases: dict[str, Path], examples: dict[str, list[str]]) -> dict[str, dict[str, dict[str, float]]]:
    """recall@k of the project's evaluation (selection/evaluation.py) with the default
    settings, per case file, without and with a policy file holding ``examples``. Every
    later turn admits its top-k (``refresh_rank`` past any catalogue, no insurance), so
    what is measured is the examples' effect on ranking, not the cache-aware admission's."""
    settings = Settings(refresh_rank=10_000, refresh_share=0)
    policies = {"before": load_policy(settings, {}), "after": load_policy(settings, {"examples": examples})}
    results: dict[str, dict[str, dict[str, float]]] = {}
    async with httpx.AsyncClient() as client:
        embedder = build_embedder(settings, client)
        await embedder.load()
        engine = SelectionEngine(embedder, vector_cache_size=100_000, index_cache_size=8,
                                 timeout_s=120.0, index_timeout_s=600.0, signals=PLAIN_SIGNALS)
        try:
            for name, path in cases.items():
                case_set = load_cases(path)
                for when, policy in policies.items():
                    scorer = EngineScorer(engine, policy)
                    report = await evaluate(case_set, [scorer], policy, ks=KS)
                    rows = report["methods"][0]["ks"]
                    results.setdefault(name, {})[when] = {row["k"]: row["recall"] for row in rows}
        finally:
            await engine.aclose()
    return results


def test_harvested_examples_raise_recall_on_the_replay(
    replayed: Replayed, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import tomllib

    assert main(["usage", "report", "--db", str(replayed.db), "--json", "--no-tokenize"]) == 0
    report = json.loads(capsys.readouterr().out)
    fragment = report["examples"]["toml"]
    policy_file = tmp_path / "policy.toml"
    policy_file.write_text(fragment)
    adopted = load_policy(Settings(policy_file=policy_file))  # the fragment is a valid policy file
    examples = {tool: list(texts) for tool, texts in adopted.examples.items()}
    assert examples == tomllib.loads(fragment)["examples"]
    # Every suggestion is a user message that preceded a call of that tool.
    preceding: dict[str, set[str]] = defaultdict(set)
    for step in replayed.steps:
        user = [m["content"] for m in step.case["messages"] if m["role"] == "user"][-1]
        preceding[step.call["name"]].add(" ".join(user.split()))
    assert examples and all(set(texts) <= preceding[tool] for tool, texts in examples.items())

    files = {
        "replayed": cases_file(tmp_path / "replayed.jsonl", replayed.steps),
        "held_out": cases_file(tmp_path / "held_out.jsonl", replayed.held_out),
    }
    recall = asyncio.run(recall_at_k(files, examples))
    with capsys.disabled():
        print(f"\nrecall@k before -> after adopting {sum(map(len, examples.values()))} harvested "
              f"examples for {len(examples)} tools; replayed: {len(replayed.steps)} steps of "
              f"{REPLAYED} conversations, held out: {len(replayed.held_out)} steps")
        for k in recall["replayed"]["before"]:
            print("  k=" + k + "".join(
                f"  {name} {recall[name]['before'][k]:.3f} -> {recall[name]['after'][k]:.3f}"
                for name in files
            ))
    for name in files:  # never worse, at any k; better at k=1 (in and out of sample)
        before, after = recall[name]["before"], recall[name]["after"]
        assert all(after[k] >= before[k] for k in before), name
        assert after["1"] > before["1"], name


# --------------------------------------------------------------------------- privacy and dedup


def test_text_is_not_stored_unless_asked(
    tmp_path: Path, conversations: dict[str, list[dict[str, Any]]], catalog_tools: list[dict[str, Any]]
) -> None:
    db = tmp_path / "usage.db"
    steps = steps_of(next(iter(conversations.values())))
    with running_proxy(usage_db=db, **REPLAY_SETTINGS) as proxy:
        replay(proxy, steps, catalog_tools)
        proxy.flush()
        written = proxy.usage.written
    assert written == len(steps)
    data = read_usage(db)
    assert len(data.calls) == len(steps) and data.examples == []
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("usage.db"))
    for step in steps:
        for message in step.case["messages"]:
            if message["role"] in ("user", "tool") and len(message["content"]) > 12:
                assert message["content"].encode() not in raw
    conversation = steps[0].conversation
    assert conversation.encode() not in raw  # only its hash
    assert {c.conversation for c in data.calls} == {log_id(HEADER_ID_PREFIX + conversation)}


def test_history_only_calls_misses_dry_run_and_fallbacks(tmp_path: Path) -> None:
    db = tmp_path / "usage.db"
    ask = {"role": "user", "content": "Open https://example.com in the browser and take a screenshot"}
    unseen = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "old1", "type": "function", "function": {"name": "browser_resize", "arguments": "{}"}}]}
    history = [ask, unseen, {"role": "tool", "tool_call_id": "old1", "content": "ok"}]
    with running_proxy(usage_db=db, top_k=2, max_tools=4) as proxy:
        # A call the proxy never saw in a response: `history`, once over two requests.
        proxy.upstream.expect("c1", [{"id": "r1", "name": "browser_navigate", "arguments": "{}"}])
        proxy.post({"model": "m", "messages": history, "tools": PLAYWRIGHT}, "c1")
        # The model calls a tool that was not forwarded and may not load it: a miss.
        proxy.upstream.expect("c1", [{"id": "r2", "name": "browser_sessionstorage_delete", "arguments": "{}"}], load=False)
        proxy.post({"model": "m", "messages": history, "tools": PLAYWRIGHT}, "c1")
        # Dry run: the response is not read; the next request's history shows the call,
        # classified against the selection the dry run computed.
        proxy.upstream.expected = []
        proxy.post({"model": "m", "messages": [ask], "tools": PLAYWRIGHT}, "c2", **{"X-Tool-Pruning": "dry-run"})
        made = {"role": "assistant", "content": None, "tool_calls": [
            {"id": "d1", "type": "function", "function": {"name": "browser_localstorage_clear", "arguments": "{}"}}]}
        proxy.post({"model": "m", "messages": [ask, made, {"role": "tool", "tool_call_id": "d1", "content": "[]"}],
                    "tools": PLAYWRIGHT}, "c2")
        # A fallback: an unparseable catalogue entry.
        hostile = [*PLAYWRIGHT, {"type": "function", "function": {"name": ""}}]
        proxy.post({"model": "m", "messages": [ask], "tools": hostile}, "c3")
        proxy.flush()
    data = read_usage(db)
    calls = sorted((c.tool, c.status, c.turn) for c in data.calls)
    assert ("browser_resize", "history", 1) in calls
    assert ("browser_sessionstorage_delete", "miss", 2) in calls
    assert ("browser_localstorage_clear", "miss", 1) in calls
    navigate = [c for c in calls if c[0] == "browser_navigate"]
    assert len(navigate) == 1 and navigate[0][1] in ("forwarded", "loaded") and navigate[0][2] == 1
    assert len(calls) == 4  # browser_resize counted once over two requests
    assert proxy.upstream.outcomes[1] == ("c1", "browser_sessionstorage_delete", "miss")
    decisions = Counter(r.decision for r in data.requests)
    assert decisions == {"pruned": 3, "dry_run": 1, "fallback": 1}
    assert [r.reason for r in data.requests if r.decision == "fallback"] == ["catalog_error"]


def test_streamed_calls_are_logged_once(tmp_path: Path) -> None:
    db = tmp_path / "usage.db"
    ask = {"role": "user", "content": "Open https://example.com in the browser"}
    call = {"id": "s1", "name": "browser_navigate", "arguments": '{"url": "https://example.com"}'}
    with running_proxy(usage_db=db, top_k=2) as proxy:
        proxy.upstream.expect("s", [call])
        body = {"model": "m", "messages": [ask], "tools": PLAYWRIGHT, "stream": True}
        assert b"browser_navigate" in proxy.post(body, "s").content
        made = {"role": "assistant", "content": None, "tool_calls": [
            {"id": "s1", "type": "function", "function": {"name": call["name"], "arguments": call["arguments"]}}]}
        proxy.upstream.expected = []
        follow_up = [ask, made, {"role": "tool", "tool_call_id": "s1", "content": "navigated"}]
        proxy.post({**body, "messages": follow_up}, "s")
        proxy.flush()
    ((_, tool, status),) = proxy.upstream.outcomes
    data = read_usage(db)
    assert [(c.tool, c.status, c.turn) for c in data.calls] == [(tool, status, 1)]


def test_text_path_calls_are_read_from_the_history(tmp_path: Path) -> None:
    from tests.support.agent_prompts import hermes_prompt

    tools = PLAYWRIGHT[:40]
    system = {"role": "system", "content": hermes_prompt(tools)}
    ask = {"role": "user", "content": "Open https://example.com in the browser and take a screenshot of the page"}
    called = ["browser_take_screenshot", "browser_localstorage_clear"]
    text = "".join(f"<tool_call>\n{json.dumps({'name': n, 'arguments': {}})}\n</tool_call>\n" for n in called)
    history = [system, ask, {"role": "assistant", "content": text},
               {"role": "tool", "content": "<tool_response>done</tool_response>"}]
    with running_proxy(usage_db=db_path(tmp_path), top_k=2) as proxy:
        proxy.upstream.expected = []
        proxy.post({"model": "m", "messages": [system, ask]}, "t")
        kept_prompt = proxy.upstream.requests[-1].json()["messages"][0]["content"]
        for _ in range(2):  # the second request repeats the history: nothing new
            proxy.post({"model": "m", "messages": history}, "t")
        proxy.flush()
    kept = {json.dumps(t, ensure_ascii=False) in kept_prompt for t in tools if t["function"]["name"] in called}
    expected = sorted(
        (t["function"]["name"], "forwarded" if json.dumps(t, ensure_ascii=False) in kept_prompt else "miss", 1)
        for t in tools
        if t["function"]["name"] in called
    )
    assert kept == {True, False}  # one of each, so both statuses are checked
    data = read_usage(db_path(tmp_path))
    assert sorted((c.tool, c.status, c.turn) for c in data.calls) == expected
    assert [r.path for r in data.requests] == ["text"] * 3


def db_path(tmp_path: Path) -> Path:
    return tmp_path / "usage.db"


# --------------------------------------------------------------------------- a bad database


def one_request(proxy: Proxy) -> httpx.Response:
    proxy.upstream.expected = []
    ask = {"role": "user", "content": "Take a screenshot"}
    return proxy.post({"model": "m", "messages": [ask], "tools": PLAYWRIGHT}, "locked")


def test_a_locked_database_never_fails_nor_delays_a_request(tmp_path: Path) -> None:
    db = tmp_path / "usage.db"
    with running_proxy(usage_db=db, top_k=2) as proxy:
        one_request(proxy)
        proxy.flush()  # the schema exists
        holder = sqlite3.connect(db, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        try:
            # Served while another connection holds the write lock: the request never
            # waits for the database (the writer thread does, up to its busy timeout).
            response = one_request(proxy)
            assert response.status_code == 200
            assert response.json()["choices"][0]["message"]["content"] == "ok"
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        proxy.flush()
        assert proxy.usage.dropped == 0
    assert len(read_usage(db).requests) == 2


def test_a_lock_held_past_the_busy_timeout_drops_events_and_counts_them(tmp_path: Path) -> None:
    db = tmp_path / "usage.db"
    log = UsageLog(db, busy_timeout_s=0.05)
    assert log.flush(FLUSH_TIMEOUT_S)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        log.record_fallback("embedder_error")
        assert log.flush(FLUSH_TIMEOUT_S)
        assert log.dropped == 1 and log.errors == 1
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    log.record_fallback("embedder_error")
    assert log.flush(FLUSH_TIMEOUT_S) and log.written == 1
    assert log.close()


def make_read_only(db: Path) -> None:
    """Mark the file read-only in its header (write version 3: SQLite must not write it;
    this holds for root too, unlike file permissions), and drop write permission."""
    with sqlite3.connect(db) as connection:
        connection.execute("PRAGMA journal_mode = DELETE")
    with db.open("r+b") as handle:
        handle.seek(18)
        handle.write(bytes([3]))
    db.chmod(0o444)


@pytest.mark.parametrize("damage", ["read_only", "not_a_database", "directory"])
def test_a_read_only_or_broken_database_never_fails_a_request(tmp_path: Path, damage: str) -> None:
    db = tmp_path / "usage.db"
    if damage == "read_only":
        UsageLog(db).close()
        make_read_only(db)
    elif damage == "not_a_database":
        db.write_bytes(b"this is not a database" * 100)
    else:
        db.mkdir()
    with running_proxy(usage_db=db, top_k=2) as proxy:
        for _ in range(2):
            response = one_request(proxy)
            assert response.status_code == 200
            assert response.json()["choices"][0]["message"]["content"] == "ok"
        proxy.flush()
        assert proxy.usage.dropped == 2 and proxy.usage.written == 0
        assert proxy.usage.errors >= 1
    if damage == "read_only":  # the report still reads it
        assert read_usage(db).requests == []
