"""The ``toolprune`` command line (argparse): ``serve``, ``eval``, ``explain``,
``usage report``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import uvicorn

from config.settings import Settings
from proxy import eval_cli, explain_cli, usage_cli
from proxy.server import configure

#: The app factory uvicorn imports in each worker process (settings from the environment).
APP_FACTORY = "proxy.app:create_app_from_env"


def _serve(args: argparse.Namespace) -> int:
    overrides = {
        "TOOLPRUNE_HOST": args.host,
        "TOOLPRUNE_PORT": None if args.port is None else str(args.port),
        "TOOLPRUNE_UPSTREAM_URL": args.upstream,
        "TOOLPRUNE_WARM_FILES": ",".join(str(path) for path in args.warm) if args.warm else None,
    }
    # Workers are separate processes that build their settings from the environment.
    os.environ.update({name: value for name, value in overrides.items() if value is not None})
    settings = Settings()
    if args.workers > 1 and settings.state_url is None:
        print(
            "toolprune serve: --workers > 1 needs TOOLPRUNE_STATE_URL (Redis), so that every "
            "worker sees each conversation's loaded tools",
            file=sys.stderr,
        )
        return 2
    uvicorn.run(
        APP_FACTORY,
        factory=True,
        workers=args.workers,
        http=configure(settings),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        access_log=False,
        server_header=False,
        date_header=False,
        timeout_graceful_shutdown=settings.shutdown_grace_s,  # type: ignore[arg-type]
    )
    return 0


def _workers(value: str) -> int:
    workers = int(value)
    if workers < 1:
        raise argparse.ArgumentTypeError("--workers must be at least 1")
    return workers


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="toolprune", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the proxy (settings from TOOLPRUNE_* env)")
    serve.add_argument("--host", help="bind address (TOOLPRUNE_HOST)")
    serve.add_argument("--port", type=int, help="port (TOOLPRUNE_PORT)")
    serve.add_argument("--upstream", help="upstream OpenAI base URL (TOOLPRUNE_UPSTREAM_URL)")
    serve.add_argument(
        "--workers", type=_workers, default=1,
        help="worker processes sharing the port (>1 needs TOOLPRUNE_STATE_URL)",
    )
    serve.add_argument(
        "--warm", nargs="+", type=Path, metavar="FILE",
        help="catalogues to index at start-up: JSON tools arrays or request bodies "
        "(TOOLPRUNE_WARM_FILES)",
    )
    serve.set_defaults(run=_serve)
    evaluate = commands.add_parser(
        "eval", help="measure tool selection on labelled cases (see proxy/eval_cli.py)"
    )
    eval_cli.add_arguments(evaluate)
    evaluate.set_defaults(run=eval_cli.run)
    explain = commands.add_parser(
        "explain", help="offline dry run of the selection on one request body"
    )
    explain_cli.add_arguments(explain)
    explain.set_defaults(run=explain_cli.run)
    usage = commands.add_parser("usage", help="what the usage log (TOOLPRUNE_USAGE_DB) says")
    usage_commands = usage.add_subparsers(dest="usage_command", required=True)
    usage_report = usage_commands.add_parser(
        "report", help="per-tool table, suggested CORE, harvested example utterances"
    )
    usage_cli.add_arguments(usage_report)
    usage_report.set_defaults(run=usage_cli.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
