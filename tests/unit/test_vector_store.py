"""The disk store of tool vectors (selection.indexes.vector_store): a real SQLite file in a
temporary folder; several stores on one file stand for several workers."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from selection.errors import VectorStoreError
from selection.indexes.vector_store import (
    FILE_NAME,
    ROW_OVERHEAD_BYTES,
    SqliteVectorStore,
    vector_key,
)

DIM = 8


def unit(seed: int) -> np.ndarray:
    vector = np.random.default_rng(seed).normal(size=DIM).astype(np.float32)
    return vector / np.linalg.norm(vector)


def keys(n: int, start: int = 0) -> list[bytes]:
    return [vector_key("embedder", f"text {i}") for i in range(start, start + n)]


def test_vectors_put_are_read_back_exactly_by_another_store_on_the_file(tmp_path: Path) -> None:
    writer, reader = SqliteVectorStore(tmp_path, 1 << 20), SqliteVectorStore(tmp_path, 1 << 20)
    writer.put_many({key: unit(i) for i, key in enumerate(keys(3))})
    found = reader.get_many([*keys(3), vector_key("embedder", "never stored")])
    assert sorted(found) == sorted(keys(3))
    for i, key in enumerate(keys(3)):
        np.testing.assert_array_equal(found[key], unit(i))
        assert found[key].dtype == np.float32


def test_the_key_depends_on_the_embedder_and_the_text() -> None:
    assert vector_key("a", "text") != vector_key("b", "text") != vector_key("a", "other")
    assert vector_key("a", "text") == vector_key("a", "text") and len(vector_key("a", "t")) == 32
    assert vector_key("a", "lone \ud800 surrogate")  # hashable whatever the text


def test_the_store_is_pruned_to_its_size_least_recently_used_first(tmp_path: Path) -> None:
    row = DIM * 4 + ROW_OVERHEAD_BYTES
    now = [1000.0]
    store = SqliteVectorStore(tmp_path, 10 * row, clock=lambda: now[0])
    store.put_many({key: unit(i) for i, key in enumerate(keys(8))})
    now[0] += 10
    store.get_many(keys(2))  # the oldest two, used again
    now[0] += 10
    store.put_many({key: unit(i) for i, key in enumerate(keys(4, start=8))})  # 12 rows: over
    kept = store.get_many(keys(12))
    assert len(kept) == 9  # pruned to 90 % of the bound
    assert set(keys(2)) <= set(kept) and set(keys(4, start=8)) <= set(kept)


def test_a_file_that_is_not_sqlite_is_set_aside_and_replaced(tmp_path: Path) -> None:
    (tmp_path / FILE_NAME).write_bytes(b"this is not a database" * 100)
    store = SqliteVectorStore(tmp_path, 1 << 20)
    store.put_many({keys(1)[0]: unit(0)})
    assert keys(1)[0] in store.get_many(keys(1))
    assert (tmp_path / (FILE_NAME + ".damaged")).read_bytes().startswith(b"this is not")


def test_another_applications_database_is_set_aside_not_written(tmp_path: Path) -> None:
    other = sqlite3.connect(tmp_path / FILE_NAME)
    other.execute("CREATE TABLE vectors (key BLOB, vector BLOB, used INTEGER)")
    other.execute("INSERT INTO vectors VALUES (?, ?, 1)", (keys(1)[0], unit(0).tobytes()))
    other.commit()
    other.close()
    store = SqliteVectorStore(tmp_path, 1 << 20)
    assert store.get_many(keys(1)) == {}  # nothing of a file that is not the store's is read
    aside = sqlite3.connect(tmp_path / (FILE_NAME + ".damaged"))
    assert aside.execute("SELECT count(*) FROM vectors").fetchone() == (1,)
    aside.close()


def test_a_row_that_is_not_a_unit_float32_vector_reads_as_missing(tmp_path: Path) -> None:
    store = SqliteVectorStore(tmp_path, 1 << 20)
    good, short, scaled, nan = keys(4)
    store.put_many({good: unit(0), scaled: 3 * unit(1)})
    connection = sqlite3.connect(tmp_path / FILE_NAME)
    connection.execute("INSERT INTO vectors VALUES (?, ?, 1)", (short, b"abc"))
    connection.execute("INSERT INTO vectors VALUES (?, ?, 1)",
                       (nan, np.full(DIM, np.nan, np.float32).tobytes()))
    connection.commit()
    connection.close()
    assert list(store.get_many([good, short, scaled, nan])) == [good]


def test_a_folder_that_cannot_be_made_is_a_vector_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the folder should be")
    store = SqliteVectorStore(blocker / "vectors", 1 << 20)
    with pytest.raises(VectorStoreError, match="cannot open"):
        store.get_many(keys(1))


def _write_rows(directory: str, start: int) -> None:
    store = SqliteVectorStore(Path(directory), 1 << 24)
    for batch in range(10):
        store.put_many({key: unit(batch) for key in keys(20, start=start + 20 * batch)})
    store.close()


def test_worker_processes_write_one_store_at_once_and_lose_nothing(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_write_rows, args=(str(tmp_path), 1000 * i)) for i in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    every = [key for i in range(3) for key in keys(200, start=1000 * i)]
    assert len(SqliteVectorStore(tmp_path, 1 << 24).get_many(every)) == 600
