"""An OpenAI-compatible ``/v1/embeddings`` endpoint as the embedder: the upstream's own
(kind ``upstream``) or a separate URL (kind ``url``) (:class:`HttpEmbedder`; the protocol:
:mod:`selection.embedders.protocol`)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from selection.embedders.protocol import normalise
from selection.errors import EmbedderError, EmbedderTimeout

if TYPE_CHECKING:
    import httpx


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
        return normalise(vectors)

    async def aclose(self) -> None:
        """Close the HTTP client if this embedder created it."""
        if self._owns_client:
            await self._client.aclose()
