"""An embedder whose vectors are kept on disk between benchmark runs, so a measurement that
embeds the same catalogues many times (``benchmarks/learning.py``) pays for each text once."""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from selection.embedders.onnx import OnnxEmbedder


class DiskCachedEmbedder:
    """An :class:`OnnxEmbedder` whose vectors (float32 ``(d,)``) are kept in a pickle file
    keyed by sha256 of the text, loaded at start and written by :meth:`save`."""

    def __init__(self, inner: OnnxEmbedder, path: Path) -> None:
        self.inner, self.path = inner, path
        self.store: dict[str, np.ndarray] = pickle.loads(path.read_bytes()) if path.exists() else {}
        self.added = 0

    @property
    def id(self) -> str:
        return self.inner.id

    @property
    def ready(self) -> bool:
        return self.inner.ready

    async def load(self) -> None:
        await self.inner.load()

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        keys = [hashlib.sha256(text.encode()).hexdigest() for text in texts]
        missing = [i for i, key in enumerate(keys) if key not in self.store]
        if missing:
            fresh = await self.inner.embed([texts[i] for i in missing])
            for i, vector in zip(missing, fresh, strict=True):
                self.store[keys[i]] = vector
            self.added += len(missing)
        return np.vstack([self.store[key] for key in keys]).astype(np.float32)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def save(self) -> None:
        if self.added:
            temporary = self.path.with_suffix(".tmp")
            temporary.write_bytes(pickle.dumps(self.store))
            temporary.replace(self.path)
            self.added = 0
