"""toolprune: an OpenAI-compatible proxy that forwards only the tools each chat request
needs, so a local model reads fewer tool definitions before it answers."""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import uvicorn
from pydantic import ValidationError

from config.settings import Settings
from proxy.cli import eval as eval_cli
from proxy.cli import explain as explain_cli
from proxy.cli import learn as learn_cli
from proxy.cli import usage as usage_cli
from proxy.cli.help import HelpFormatter, from_setting
from proxy.log import SERVER_LOG_CONFIG

#: The app factory uvicorn imports in each worker process (settings from the environment).
APP_FACTORY = "proxy.app:create_app_from_env"
#: The HTTP protocol: uvicorn's httptools one with a header deadline and a connection
#: bound (its limits are set by the app factory, from the same settings).
HTTP_PROTOCOL = "proxy.http.server:GuardedHttpProtocol"

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
        http=HTTP_PROTOCOL,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        log_config=SERVER_LOG_CONFIG,
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


EPILOG = """\
examples:
  toolprune serve --upstream http://127.0.0.1:8080/v1    run the proxy on 127.0.0.1:8088
  toolprune explain request.json                        which tools a request would get, and why
  toolprune eval cases.jsonl --k 4,8                    measure selection on labelled cases
  toolprune usage report --since 7d                     what the usage log says
  toolprune learn                                       learn selection from the usage log

Settings come from TOOLPRUNE_* environment variables (docs/reference/settings.md).
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toolprune", description=__doc__, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    commands = parser.add_subparsers(dest="command", title="commands", metavar="COMMAND")
    serve = commands.add_parser(
        "serve", formatter_class=HelpFormatter,
        help="run the proxy in the foreground (Ctrl-C stops it)",
        description="Run the proxy in the foreground until interrupted. Every setting comes\n"
        "from TOOLPRUNE_* environment variables; these options override some of them.",
    )
    serve.add_argument("--host", help=f"address to listen on {from_setting('host')}")
    serve.add_argument("--port", type=int, help=f"port to listen on {from_setting('port')}")
    serve.add_argument(
        "--upstream",
        help=f"the model server's OpenAI base URL {from_setting('upstream_url')}",
    )
    serve.add_argument(
        "--workers", type=_workers, default=1,
        help="worker processes sharing the port (more than 1 needs TOOLPRUNE_STATE_URL)",
    )
    serve.add_argument(
        "--warm", nargs="+", type=Path, metavar="FILE",
        help="catalogues to index at start-up: JSON tools arrays or request bodies "
        "(default: $TOOLPRUNE_WARM_FILES, else none)",
    )
    serve.set_defaults(run=_serve)
    for name, module, summary in (
        ("eval", eval_cli, "measure tool selection on labelled cases (recall@k, next to BM25)"),
        ("explain", explain_cli,
         "show which tools one request would be forwarded, and why (offline)"),
        ("learn", learn_cli,
         "learn selection from the usage log's traffic, promoted only when it ranks better"),
    ):
        command = commands.add_parser(
            name, formatter_class=HelpFormatter, help=summary, description=module.DESCRIPTION
        )
        module.add_arguments(command)
        command.set_defaults(run=module.run)
    usage = commands.add_parser(
        "usage", help="read the usage log (TOOLPRUNE_USAGE_DB)",
        description="Read the usage log the proxy writes when TOOLPRUNE_USAGE_DB is set.",
    )
    usage_commands = usage.add_subparsers(dest="usage_command", title="commands", metavar="COMMAND")
    usage_report = usage_commands.add_parser(
        "report", formatter_class=HelpFormatter,
        help="per-tool table, suggested CORE tools, example utterances",
        description=usage_cli.DESCRIPTION,
    )
    usage_cli.add_arguments(usage_report)
    usage_report.set_defaults(run=usage_cli.run)
    usage.set_defaults(run=lambda args: _print_help(usage))
    return parser


def package_version() -> str:
    """The installed distribution's version (``pyproject.toml``), or "unknown" when the
    code runs from a source tree that was never installed."""
    try:
        return importlib.metadata.version("toolprune")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _print_help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 on success, 2 on a usage error or
    an invalid setting, 1 when the reader of standard output went away: ``| head``).
    Without a command, prints the help."""
    try:
        status = _run(build_parser(), argv)
        sys.stdout.flush()  # a closed pipe is met here, not in the interpreter's exit
        return status
    except BrokenPipeError:
        # Python's documented handling (library/signal.html, "Note on SIGPIPE"): nothing
        # more is written to the closed pipe, not even at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _run(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> int:
    args = parser.parse_args(argv)
    if args.command is None:
        return _print_help(parser)
    try:
        return args.run(args)
    except ValidationError as error:  # a TOOLPRUNE_* variable, or an option that sets one
        print(f"toolprune {args.command}: {settings_errors(error)}", file=sys.stderr)
        return 2


def settings_errors(error: ValidationError) -> str:
    """One line per invalid setting of ``error``: its variable and pydantic's reason
    (the value itself is not repeated: it may be a credential)."""
    lines = [f"{error.error_count()} invalid setting(s):"]
    for item in error.errors(include_url=False, include_input=False):
        field = "_".join(str(part) for part in item["loc"]).upper()
        lines.append(f"  TOOLPRUNE_{field}: {item['msg']}" if field else f"  {item['msg']}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
