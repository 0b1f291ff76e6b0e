"""The ``toolprune`` command line (argparse): ``serve``, ``eval``, ``explain``,
``usage report``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import uvicorn

from config.settings import Settings
from proxy.app import create_app
from proxy.cli import eval as eval_cli
from proxy.cli import explain as explain_cli
from proxy.cli import usage as usage_cli


def _serve(args: argparse.Namespace) -> int:
    overrides = {
        key: value
        for key, value in {"host": args.host, "port": args.port, "upstream_url": args.upstream}.items()
        if value is not None
    }
    settings = Settings(**overrides)
    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        access_log=False,
        server_header=False,
        date_header=False,
        timeout_graceful_shutdown=int(settings.shutdown_grace_s),
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="toolprune", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the proxy (settings from TOOLPRUNE_* env)")
    serve.add_argument("--host", help="bind address (TOOLPRUNE_HOST)")
    serve.add_argument("--port", type=int, help="port (TOOLPRUNE_PORT)")
    serve.add_argument("--upstream", help="upstream OpenAI base URL (TOOLPRUNE_UPSTREAM_URL)")
    serve.set_defaults(run=_serve)
    evaluate = commands.add_parser(
        "eval", help="measure tool selection on labelled cases (see proxy/cli/eval.py)"
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
