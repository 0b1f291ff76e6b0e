"""``toolprune eval CASES …``: selection quality on labelled cases, offline. Each CASES is
a ``cases.jsonl`` or a set's folder holding one (``<data>/<set>/cases.jsonl``).

Runs the proxy's selection path (settings from ``TOOLPRUNE_*`` and the policy file, the
configured embedder — by default the embedded all-MiniLM-L6-v2) on each case of each
data file, sweeping k, next to the anchors (dense top-k with τ, BM25, the oracle); prints
a table per file, or JSON; ``--plot FILE`` draws recall and schema tokens against k.
See :mod:`selection.evaluation` for what is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from config.policy import load_policy
from config.selector import build_selector
from config.settings import Settings
from proxy.cli.help import HelpFormatter, from_setting
from selection.evaluation import (
    ABLATIONS,
    DEFAULT_KS,
    BM25Scorer,
    EngineScorer,
    PlotUnavailable,
    Scorer,
    ablation_scorers,
    evaluate,
    format_report,
    k_label,
    load_cases,
    parse_ks,
    plot_reports,
    strip_miss_lists,
)
from selection.learning import LearnedStates
from selection.types import Embedder, PolicyError, SelectionError

if TYPE_CHECKING:
    import httpx

EmbedderFactory = Callable[[Settings, "httpx.AsyncClient"], Embedder]


DESCRIPTION = """\
Measure how well the proxy picks tools, offline: each labelled case (a conversation,
its tools, and the tools its next call needs) goes through the proxy's own selection
code, with the conversation's state carried from step to step, for each k of the sweep.
Prints, per file, recall@k (needed tools that were forwarded), all@k (cases with every
needed tool forwarded), MRR, tools forwarded, the ranks of the misses and the selection
latency, next to a BM25 baseline. Nothing is sent to a model.

With --learn-from, another file's cases are first replayed as the agent's traffic and
learned from (docs/learning.md), and the data files are scored with what was promoted.

With --live BASE_URL, each case is instead sent to a real OpenAI-compatible server
(llama-server, Lemonade, vLLM, Ollama…) at temperature 0, twice: with every tool
(direct) and through toolprune (the proxy of `toolprune serve`, run in this process with
the same settings), and the first call the client gets is scored: correct,
recovered_by_search, selection_error, retrieval_miss or errors; per file, each way's
end-to-end success with its 95% interval, the difference toolprune - direct with its
paired interval, prompt tokens and seconds per case (docs/eval-live.md in the
repository). The cases' tools run nowhere.

Input: JSON Lines, one case per line (format: docs/eval-format.md in the repository),
given as the file or as a set's folder holding it (<data>/<set>/cases.jsonl).
Selection settings come from TOOLPRUNE_* variables and the policy file; the options
below override them for this run.

example:
  toolprune eval tests/data/bfcl_multi_turn_tradingbot/cases.jsonl --k 2,4,8
  toolprune eval tests/data/bfcl_multi_turn_tradingbot --k 2,4,8      (the same set)
  toolprune eval tests/data/bfcl_multi_turn_tradingbot --live http://127.0.0.1:8080/v1 \
      --results live.jsonl                                (your model, resumable)
"""

#: The file a set's folder holds its cases in.
CASES_FILE = "cases.jsonl"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("data", nargs="+", type=Path, metavar="CASES",
                        help="files of labelled cases, one JSON object a line, or the "
                        f"folders of sets holding them ({CASES_FILE})")
    parser.add_argument(
        "--k",
        help="the k values to measure, comma-separated; 'all' forwards the whole catalogue "
        f"(default: {','.join(k_label(k) for k in DEFAULT_KS)})",
    )
    parser.add_argument(
        "--limit", type=int, metavar="N",
        help="use a random sample: whole conversations until at least N cases per file",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the --limit sample")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--misses", action="store_true",
        help="with --json: list every miss with its rank; with --live: list the cases whose "
        "outcomes differ between direct and toolprune",
    )
    parser.add_argument("--no-bm25", action="store_true", help="skip the BM25 anchor")
    parser.add_argument(
        "--ablate", default="", metavar="NAMES",
        help="also measure the pipeline without each of these, comma-separated: a signal "
             f"or expansion, or sticky (the conversation's state); one of: {', '.join(ABLATIONS)}",
    )
    parser.add_argument(
        "--plot", type=Path, metavar="FILE",
        help="also draw recall and forwarded schema tokens against k, one line per method "
        "(PNG/SVG/PDF by suffix; needs the 'plot' extra: matplotlib)",
    )
    parser.add_argument("--policy", type=Path, metavar="FILE",
                        help=f"TOML policy file {from_setting('policy_file')}")
    parser.add_argument("--threshold", type=float, metavar="TAU",
                        help=f"least cosine score a tool needs, τ {from_setting('threshold')}")
    parser.add_argument("--top-k", type=int, metavar="K",
                        help=f"k of the latency measurement {from_setting('top_k')}")
    parser.add_argument(
        "--query-user-messages", type=int, metavar="N",
        help=f"user messages that make up the query {from_setting('query_user_messages')}",
    )
    parser.add_argument("--query-chars", type=int, metavar="N",
                        help=f"characters of the query embedded {from_setting('query_chars')}")
    parser.add_argument(
        "--query-parts", type=int, metavar="N",
        help=f"parts of the query embedded with it {from_setting('query_parts')}",
    )
    parser.add_argument(
        "--no-progress", action="store_true", help="no progress bar (shown on a terminal only)"
    )
    parser.add_argument(
        "--learn-from", type=Path, metavar="DEV",
        help="first replay these cases as the agent's traffic (expected tools called, "
        "reached through the meta-tool when not forwarded) into a temporary usage log, "
        "learn from it (docs/learning.md), then score the data files with what was promoted",
    )
    parser.add_argument("--learn-share", type=float, default=1.0, metavar="F",
                        help="with --learn-from: replay this share (0–1] of its conversations")
    parser.add_argument("--learn-seed", type=int, default=0,
                        help="seed of the --learn-share draw")
    live = parser.add_argument_group(
        "live evaluation", "with --live: send each case to a real model, with every tool and "
        "through toolprune (the options --k, --no-bm25, --ablate and --learn-from do not apply)")
    live.add_argument("--live", metavar="BASE_URL",
                      help="the model server's OpenAI base URL (llama-server "
                      "http://HOST:8080/v1, Lemonade http://HOST:8000/api/v1); its bearer "
                      f"token, if any, {from_setting('upstream_api_key')}")
    live.add_argument("--model", metavar="NAME",
                      help="the model to ask (default: the first the server's /models lists)")
    live.add_argument("--results", type=Path, metavar="FILE",
                      help="keep each case's outcome in FILE (JSON Lines) as it completes; a "
                      "run on the same FILE goes on where it stopped")
    live.add_argument("--max-tokens", type=int, default=1024, metavar="N",
                      help="max_tokens of each answer")
    live.add_argument("--timeout", type=float, default=900.0, metavar="S",
                      help="seconds to wait for one answer")
    live.add_argument("--proxy-log", type=Path, metavar="FILE",
                      help="write the proxy's JSON log lines to FILE (default: its warnings "
                      "and errors to stderr)")


def cases_file(path: Path) -> Path:
    """The cases file ``path`` names: itself, or the :data:`CASES_FILE` of a set's folder.
    Raises ValueError (one line: what the command takes) for a folder without one."""
    if not path.is_dir():
        return path
    if not (path / CASES_FILE).is_file():
        raise ValueError(f"{path} is a folder without {CASES_FILE}: give a cases file "
                         f"(JSON Lines) or a set's folder holding {CASES_FILE}")
    return path / CASES_FILE


def _settings(args: argparse.Namespace) -> Settings:
    overrides = {
        "policy_file": args.policy,
        "threshold": args.threshold,
        "top_k": args.top_k,
        "query_user_messages": args.query_user_messages,
        "query_chars": args.query_chars,
        "query_parts": args.query_parts,
    }
    return Settings(**{key: value for key, value in overrides.items() if value is not None})


def _progress(disabled: bool) -> Callable[[Iterable[Any], str], Iterable[Any]]:
    from tqdm import tqdm

    def wrap(items: Iterable[Any], label: str) -> Iterable[Any]:
        total = len(items) if hasattr(items, "__len__") else None  # type: ignore[arg-type]
        # disable=None: shown only when stderr is a terminal.
        return tqdm(items, total=total, desc=label, unit="case", file=sys.stderr,
                    disable=True if disabled else None, leave=False)

    return wrap


def default_embedder_factory(settings: Settings, client: httpx.AsyncClient) -> Embedder:
    """The configured embedder, as the proxy builds it (tests replace this function)."""
    from config.selector import build_embedder

    return build_embedder(settings, client)


async def run_eval(
    args: argparse.Namespace, embedder_factory: EmbedderFactory | None = None
) -> dict[str, Any]:
    """Evaluate every data file of ``args``; the JSON-ready report. ``embedder_factory``
    defaults to :func:`default_embedder_factory` (looked up at call time)."""
    import httpx  # imported here: `toolprune serve` never loads it

    embedder_factory = embedder_factory or default_embedder_factory
    settings = _settings(args)
    policy = load_policy(settings)
    ks = parse_ks(args.k or ",".join(k_label(k) for k in DEFAULT_KS))
    async with httpx.AsyncClient() as client:
        embedder = embedder_factory(settings, client)
        await embedder.load()
        # Offline budgets: a cold catalogue's whole index is waited for, and a slow query
        # is measured, not dropped.
        selector = build_selector(settings, embedder, policy=policy, offline=True)
        engine = selector.engine
        name = "minilm" if embedder.id.startswith("onnx:all-MiniLM-L6-v2") else "embed"
        scorers: list[Scorer] = [EngineScorer(engine, policy, name)]
        if not args.no_bm25:
            scorers.append(BM25Scorer(settings.index_cache_size))
        scorers += ablation_scorers(engine, policy, [n for n in args.ablate.split(",") if n])
        progress = _progress(args.no_progress)
        sets = []
        learning = None
        try:
            if args.learn_from is not None:
                if not 0 < args.learn_share <= 1:
                    raise ValueError("--learn-share must be in (0, 1]")
                from proxy.cli.traffic import learn_from_cases

                engine.learned = LearnedStates(embedder.id)
                learning = await learn_from_cases(
                    cases_file(args.learn_from), share=args.learn_share, seed=args.learn_seed,
                    settings=settings, selector=selector,
                )
            for path in args.data:
                case_set = load_cases(cases_file(path), limit=args.limit, seed=args.seed)
                report = await evaluate(
                    case_set, scorers, policy, ks=ks,
                    query_user_messages=settings.query_user_messages,
                    query_chars=settings.query_chars,
                    query_parts_max=settings.query_parts,
                    progress=lambda items, name, set_name=case_set.name: progress(
                        items, f"{set_name} {name}"
                    ),
                )
                sets.append(report if args.misses else strip_miss_lists(report))
                if not args.json:
                    print(format_report(report), flush=True)
                    print(flush=True)
        finally:
            await selector.aclose()
    if args.plot is not None:
        plot_reports(sets, args.plot)
    return {
        "config": {
            "embedder": embedder.id,
            "top_k": policy.top_k,
            "threshold": policy.threshold,
            "max_tools": policy.max_tools,
            "min_catalog_tools": policy.min_catalog_tools,
            "min_saving": policy.min_saving,
            "query_user_messages": settings.query_user_messages,
            "query_chars": settings.query_chars,
            "query_parts": settings.query_parts,
            "ks": [k_label(k) for k in ks],
            "limit": args.limit,
            "seed": args.seed,
            "max_tools_per_k": "max(max_tools, k); k=all: catalogue size",
            "learning": learning,
        },
        "sets": sets,
    }


def _live(args: argparse.Namespace) -> dict[str, Any]:
    """``--live``: the options that do not apply refused, then :func:`run_live`."""
    offline = [name for name, given in (
        ("--k", args.k is not None), ("--no-bm25", args.no_bm25), ("--ablate", bool(args.ablate)),
        ("--learn-from", args.learn_from is not None)) if given]
    if offline:
        raise ValueError(f"{', '.join(offline)} do(es) not apply to --live: the proxy selects "
                         "with its settings (--top-k, --threshold, TOOLPRUNE_*)")
    if args.max_tokens is not None and args.max_tokens < 1:
        raise ValueError("--max-tokens must be at least 1")
    from proxy.cli.live_eval import run_live  # imported here: `toolprune serve` never loads it

    sets = [load_cases(cases_file(path), limit=args.limit, seed=args.seed) for path in args.data]
    return run_live(args, _settings(args), sets)


def run(args: argparse.Namespace, embedder_factory: EmbedderFactory | None = None) -> int:
    """The ``eval`` subcommand. Exit status 0, or 2 on bad input / embedder failure (with
    ``--live``: a server that cannot be asked, a proxy that does not start, a results file
    of another run); 130 when interrupted (a ``--live`` run keeps what it finished)."""
    try:
        report = _live(args) if args.live else asyncio.run(run_eval(args, embedder_factory))
    except KeyboardInterrupt:
        kept = f"; the finished conversations are in {args.results}" if args.results else ""
        print(f"toolprune eval: interrupted{kept}", file=sys.stderr)
        return 130
    except (OSError, ValueError, sqlite3.Error, PolicyError, SelectionError,
            PlotUnavailable) as exc:
        print(f"toolprune eval: {exc}", file=sys.stderr)
        return 2
    if args.json:
        json.dump(report, sys.stdout, indent=1)
        sys.stdout.write("\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="toolprune eval", description=DESCRIPTION, formatter_class=HelpFormatter
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
