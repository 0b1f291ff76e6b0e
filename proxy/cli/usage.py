"""``toolprune usage report``: what the usage log (``TOOLPRUNE_USAGE_DB``) says.

A ranked per-tool table, a suggested CORE with its projected prompt saving, and (when the
proxy stored user text) suggested example utterances as a policy-file ``[examples]``
fragment; see :mod:`proxy.usage.analysis` for the definitions. Token counts come from
the upstream's tokenizer when it answers (llama-server ``POST /tokenize`` with
``{"content": …}`` → ``{"tokens": […]}``); otherwise token numbers are labelled
estimates. With TOOLPRUNE_LEARN and a Redis state store (TOOLPRUNE_STATE_URL), the
versions of the learned states Redis holds for the log's embedder are read too. Nothing
else is contacted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from config.settings import Settings
from proxy.cli.help import HelpFormatter, from_setting
from proxy.usage.analysis import add_token_counts, analyse
from proxy.usage.learned_reads import read_embedder, read_reports, summarise
from proxy.usage.learning_share import shared_report
from proxy.usage.reader import parse_since, read_definitions, read_usage
from proxy.usage.report import format_report

if TYPE_CHECKING:
    import httpx

#: Catalogues (most requests first) whose saving is counted with the tokenizer.
TOKENIZED_CATALOGS = 10
TOKENIZE_TIMEOUT_S = 5.0


DESCRIPTION = """\
Summarise the usage log the proxy writes when TOOLPRUNE_USAGE_DB is set: a table of the
tools called (how often, in how many conversations, how early, and how often only
through load_tools), the fewest tools to always forward (CORE) with the prompt they would
save, and, when the proxy stored user text, example phrasings per tool as a policy-file
fragment to review. Reads the database only; token counts come from the model server's
tokenizer when it answers, else they are labelled estimates.

example:
  toolprune usage report --db /var/lib/toolprune/usage.db --since 7d
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", type=Path, metavar="FILE",
                        help=f"the usage database {from_setting('usage_db')}")
    parser.add_argument(
        "--since", help="only rows since an ISO date/time (UTC) or a duration back: 7d, 12h, 2w"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--core-share", type=float, default=0.9,
        help="share of calls the suggested CORE covers",
    )
    parser.add_argument(
        "--first-turn-share", type=float, default=0.1,
        help="also suggest tools called on the first turn of at least this share of "
        "conversations",
    )
    parser.add_argument(
        "--examples", type=int, default=3,
        help="example utterances suggested per tool",
    )
    parser.add_argument(
        "--upstream",
        help="OpenAI base URL of a llama-server whose /tokenize counts the saving in "
        f"tokens; skipped when it does not answer {from_setting('upstream_url')}",
    )
    parser.add_argument(
        "--no-tokenize", action="store_true", help="do not contact a tokenizer (estimates only)"
    )


def tokenize_url(base_url: str) -> str:
    """llama-server serves ``/tokenize`` at its origin, beside ``/v1``."""
    parts = urlsplit(base_url)
    return f"{parts.scheme}://{parts.netloc}/tokenize"


def _count_tokens(client: httpx.Client, url: str, definitions: Sequence[str]) -> int:
    """Tokens of a ``tools`` array made of ``definitions`` (canonical JSON each)."""
    if not definitions:
        return 0
    response = client.post(url, json={"content": "[" + ",".join(definitions) + "]"})
    response.raise_for_status()
    tokens = response.json()["tokens"]
    if not isinstance(tokens, list):
        raise TypeError("tokenize answered without a token list")
    return len(tokens)


def token_counts(
    db: Path, report: dict[str, Any], base_url: str, timeout_s: float = TOKENIZE_TIMEOUT_S
) -> dict[str, tuple[int, int]]:
    """(full, CORE-only) token counts of the busiest catalogues; empty when the
    tokenizer is unreachable or answers something else."""
    import httpx  # imported here: `toolprune serve` never loads it

    core = set(report["core"]["names"])
    url = tokenize_url(base_url)
    counts: dict[str, tuple[int, int]] = {}
    try:
        with httpx.Client(timeout=timeout_s) as client:
            for row in report["core"]["saving"]["catalogs"][:TOKENIZED_CATALOGS]:
                if not row["requests"]:
                    continue
                definitions = read_definitions(db, row["catalog_fingerprint"])
                full = _count_tokens(client, url, list(definitions.values()))
                only_core = _count_tokens(
                    client, url, [d for name, d in definitions.items() if name in core]
                )
                counts[row["catalog_fingerprint"]] = (full, only_core)
    except (httpx.HTTPError, ValueError, KeyError, TypeError, sqlite3.Error):
        return {}
    return counts


def build_report(args: argparse.Namespace) -> dict[str, Any]:
    """The report for ``args``. Raises ValueError (bad arguments), FileNotFoundError,
    sqlite3.Error."""
    settings = Settings()
    db = args.db or settings.usage_db
    if db is None:
        raise ValueError("no usage database: pass --db or set TOOLPRUNE_USAGE_DB")
    since = parse_since(args.since) if args.since else None
    if not 0.0 <= args.core_share <= 1.0:
        raise ValueError("--core-share must be within [0, 1]")
    data = read_usage(db, since)
    report = analyse(
        data,
        core_share=args.core_share,
        first_turn_share=args.first_turn_share,
        examples_per_tool=args.examples,
    )
    report["db"] = str(db)
    report["since"] = since
    report["learning"] = summarise(read_reports(db))
    embedder = read_embedder(db) if settings.learn and settings.state_url else None
    if embedder is not None:
        assert settings.state_url is not None
        report["learning_shared"] = asyncio.run(shared_report(
            settings.state_url, embedder=embedder, key_prefix=settings.state_key_prefix,
            timeout_s=settings.redis_timeout_s,
        ))
    if not args.no_tokenize:
        counts = token_counts(Path(db), report, args.upstream or settings.upstream_url)
        if counts:
            add_token_counts(report["core"]["saving"], counts)
    return report


def run(args: argparse.Namespace) -> int:
    """The ``usage report`` subcommand. Exit status 0, or 2 on bad input."""
    try:
        report = build_report(args)
    except (OSError, ValueError, sqlite3.Error) as exc:
        print(f"toolprune usage report: {exc}", file=sys.stderr)
        return 2
    if args.json:
        json.dump(report, sys.stdout, indent=1, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        print(format_report(report))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="toolprune usage report", description=DESCRIPTION, formatter_class=HelpFormatter
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
