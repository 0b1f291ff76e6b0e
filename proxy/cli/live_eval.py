"""``toolprune eval CASES --live BASE_URL``: each labelled case sent to a real
OpenAI-compatible server, with every tool (``direct``) and through toolprune
(``toolprune``: the app of ``toolprune serve``, run in this process,
:mod:`proxy.cli.live_proxy`), and the first call the client gets scored
(:mod:`selection.evaluation.live`); a report per file (:mod:`selection.evaluation.live_report`).

A conversation's cases go through the proxy in file order, as one conversation
(``X-Conversation-Id``), then straight to the server. With ``--results FILE`` each
conversation's case records are appended to FILE (JSON Lines, after a first line with the
run's server, model and settings) once it is done, and a run on the same FILE skips the
conversations it holds: an interrupted run goes on where it stopped.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import httpx
from tqdm import tqdm

from config.settings import Settings
from proxy.cli.live_proxy import LiveProxy, live_proxy
from proxy.cli.live_requests import Sender, send_direct, send_through
from selection.evaluation import (
    VIAS,
    CaseSet,
    case_record,
    format_live_report,
    latest_records,
    plot_live,
    summarise_set,
)

#: A catalogue's first case waits this long for its index (seconds), as later ones would
#: not: the run measures the proxy warmed, like the offline ``toolprune eval``.
INDEX_TIMEOUT_S = 600.0
#: The run's facts a results file must share with a run that goes on with it.
RESUME_KEYS = ("base_url", "model", "max_tokens", "top_k", "threshold", "max_tools")


def live_settings(settings: Settings, timeout_s: float) -> Settings:
    """The proxy's settings for a live run: the user's, with the decision lines logged
    (they say what the meta-calls loaded), conversation state in this process (the run's
    own conversations; never the user's Redis), no usage log or learning (the run is not
    the agent's traffic), a catalogue's index waited for, and the server waited for as
    long as a direct request is (``timeout_s``, seconds)."""
    return settings.model_copy(update={
        "log_level": "info", "state_url": None, "usage_db": None, "learn": False,
        "index_timeout_s": max(settings.index_timeout_s, INDEX_TIMEOUT_S),
        "idle_timeout_s": max(settings.idle_timeout_s, timeout_s),
    })


def server_model(client: httpx.Client, base_url: str, api_key: str | None) -> str:
    """The first model ``GET {base_url}/models`` lists. Raises ValueError when the server
    does not list one."""
    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        answer = client.get(base_url.rstrip("/") + "/models", headers=headers)
        models = answer.json().get("data") if answer.status_code == 200 else None
        model = models[0]["id"] if isinstance(models, list) and models else None
    except (httpx.HTTPError, ValueError, AttributeError, KeyError, TypeError) as error:
        raise ValueError(f"{base_url}/models did not answer ({type(error).__name__}): "
                         "give the model with --model") from error
    if not isinstance(model, str):
        raise ValueError(f"{base_url}/models lists no model: give it with --model")
    return model


class ResultsFile:
    """The run's case records, kept in ``path`` (JSON Lines) when given: a first line
    ``{"config": …}``, then one record per case. A line cut off by an interrupted write is
    skipped (its conversation runs again)."""

    def __init__(self, path: Path | None, config: Mapping[str, Any]) -> None:
        self.path = path
        self.config = dict(config)
        self.records: list[Mapping[str, Any]] = []
        if path is None:
            return
        if path.is_file() and path.stat().st_size:
            self._read(path)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"config": self.config}) + "\n", encoding="utf-8")

    def _read(self, path: Path) -> None:
        lines = path.read_text(encoding="utf-8").splitlines()
        try:
            kept = json.loads(lines[0])["config"]
        except (json.JSONDecodeError, KeyError, TypeError, RecursionError) as error:
            raise ValueError(f"{path} is not a results file of toolprune eval --live") from error
        differ = [key for key in RESUME_KEYS if kept.get(key) != self.config.get(key)]
        if differ:
            raise ValueError(
                f"{path} holds a run with other {', '.join(differ)} "
                f"({', '.join(f'{k}={kept.get(k)!r}' for k in differ)}): give another "
                "--results file, or the same settings to go on with it")
        for line in lines[1:]:
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                continue
            if isinstance(record, dict) and all(via in record for via in VIAS):
                self.records.append(record)

    def add(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Keep ``records`` (a conversation's), appended to the file at once."""
        records = list(records)
        self.records.extend(records)
        if self.path is not None:
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
                handle.flush()


def _conversations(case_set: CaseSet) -> dict[str, list[Any]]:
    grouped: dict[str, list[Any]] = {}
    for case in case_set.cases:
        grouped.setdefault(case.conversation, []).append(case)
    return grouped


def _run_set(case_set: CaseSet, results: ResultsFile, client: httpx.Client, sender: Sender,
             proxy: LiveProxy, run_id: str, progress: bool) -> None:
    """Run every conversation of ``case_set`` that ``results`` does not hold whole."""
    done = latest_records(results.records)
    pending = [cases for cases in _conversations(case_set).values()
               if any((case_set.name, case.id) not in done for case in cases)]
    bar = tqdm(total=sum(len(cases) for cases in pending), desc=case_set.name, unit="case",
               file=sys.stderr, disable=True if not progress else None, leave=False)
    with bar:
        for cases in pending:
            key = hashlib.sha256(f"{case_set.name}\0{cases[0].conversation}".encode()).hexdigest()
            conversation = f"toolprune-eval-{run_id}-{key[:16]}"
            through = [send_through(client, sender, proxy, case, conversation) for case in cases]
            records = []
            for case, answer in zip(cases, through, strict=True):
                records.append(case_record(case_set.name, case, {
                    "direct": send_direct(client, sender, case), "toolprune": answer}))
                bar.update(1)
            results.add(records)


def run_live(args: argparse.Namespace, settings: Settings, sets: list[CaseSet]) -> dict[str, Any]:
    """Run ``sets`` against ``args.live`` (see the module docstring); the JSON-ready
    report. Raises ValueError (bad input, a results file of another run), OSError (a
    file; :class:`~proxy.cli.live_proxy.LiveProxyError`: the proxy did not start)."""
    settings = live_settings(settings, args.timeout)
    api_key = settings.upstream_api_key.get_secret_value() if settings.upstream_api_key else None
    base_url = args.live.rstrip("/")
    log = logging.FileHandler(args.proxy_log) if args.proxy_log else logging.StreamHandler()
    if not args.proxy_log:
        log.setLevel(logging.WARNING)
    try:
        with httpx.Client(timeout=args.timeout) as client:
            model = args.model or server_model(client, base_url, api_key)
            config = {"base_url": base_url, "model": model, "max_tokens": args.max_tokens,
                      "top_k": settings.top_k, "threshold": settings.threshold,
                      "max_tools": settings.max_tools, "temperature": 0}
            results = ResultsFile(args.results, config)
            sender = Sender(base_url, model, args.max_tokens, api_key)
            with live_proxy(settings, base_url, log=log, timeout_s=args.timeout) as proxy:
                run_id = uuid.uuid4().hex[:12]
                for case_set in sets:
                    _run_set(case_set, results, client, sender, proxy, run_id,
                             not args.no_progress)
    finally:
        log.close()
    records = latest_records(results.records)
    reports = [
        summarise_set(case_set.name, [records[(case_set.name, case.id)] for case in case_set.cases],
                      misses=args.misses)
        for case_set in sets
    ]
    if not args.json:
        for report in reports:
            print(format_live_report(report), flush=True)
            print(flush=True)
    if args.plot is not None:
        plot_live(reports, args.plot)
    return {"config": {**config, "results": str(args.results) if args.results else None,
                       "limit": args.limit, "seed": args.seed}, "sets": reports}
