"""Request bodies decoded with their catalogue parsed once.

Agents send the same ``tools`` array with every request of a conversation, and the same
one across conversations; decoding and fingerprinting it costs far more than the rest of
the body (at 10,000 tools, 5.5 MB: ~0.4 s of CPU with the standard library). A body is
therefore split into its top-level members without decoding them (``msgspec`` with
``msgspec.Raw`` values: one pass in C over the bytes), and the raw bytes of ``tools``
(or legacy ``functions``) are hashed (BLAKE3, a cryptographic hash: no two catalogues share a
key in practice, even crafted ones; at 10,000 tools, 8.4 MB, ~3 ms where sha256 took ~11),
in place, without copying them: a catalogue seen before is not decoded nor
parsed again, its decoded list and :class:`~selection.catalog.catalog.Catalog` come from a bounded
LRU cache. Every other member is decoded as :func:`selection.catalog.body.decode_object`
decodes it (``msgspec``, to the values ``json.loads`` gives; a body it rejects decoded
whole by the standard library, with no caching): decoding semantics never change, and a
body split this way keeps its members' bytes (:class:`~selection.catalog.body.DecodedBody`).

The cached ``tools`` list is shared by every request that sent those bytes: it must not be
mutated (the proxy builds new bodies and lists; it never edits the client's).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import msgspec
from blake3 import blake3

from selection.catalog.body import decode_object, decode_value
from selection.catalog.catalog import Catalog, parse_functions, parse_tools
from selection.errors import CatalogError

#: Top-level members whose raw bytes key the cache, and whether each is the legacy form.
CATALOG_MEMBERS = {"tools": False, "functions": True}

@dataclass(frozen=True)
class _Entry:
    value: Any  # the decoded member, shared (never mutated)
    catalog: Catalog | None
    error: CatalogError | None
    size: int  # raw bytes


class CatalogCache:
    """Decoded catalogues by BLAKE3 of their raw bytes, LRU-bounded by total raw bytes
    (``max_bytes``; the newest entry is kept even when it alone is larger, so the request
    that decoded it finds it) and by entry count (``max_entries``). Thread-safe:
    :meth:`decode_body` may run in worker threads.

    ``max_tool_bytes``: a catalogue with a larger tool definition (canonical JSON bytes)
    is a :class:`CatalogError`, so it is forwarded unchanged rather than indexed.
    """

    def __init__(self, max_bytes: int, max_entries: int = 256, max_tool_bytes: int | None = None) -> None:
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self.max_tool_bytes = max_tool_bytes
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._bytes = 0
        #: id() of each cached decoded list -> its entry key (the list is kept alive by
        #: the entry, so an id is never reused while it is here).
        self._by_identity: dict[int, str] = {}
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def decode_body(self, raw: bytes) -> dict[str, Any] | None:
        """The body as ``json.loads`` would decode it, or None when it is not a JSON
        object (or not UTF-8 JSON at all); ``tools``/``functions`` from the cache.
        Raises RecursionError for a body nested deeper than ``json.loads`` follows.

        Shape: ``dict[str, Any]`` (a :class:`DecodedBody` when split, a plain ``dict``
        when decoded whole); the catalogue member is the shared cached list.
        """
        return decode_object(raw, {
            name: (lambda value, legacy=legacy: self._member(value, legacy).value)
            for name, legacy in CATALOG_MEMBERS.items()
        })

    def catalog(self, value: Any, *, legacy: bool) -> Catalog:
        """The parsed catalogue of a ``tools`` (``legacy``: ``functions``) value: from the
        cache when ``value`` is a list this cache decoded, else parsed now.

        Raises: CatalogError (cached too: a bad catalogue is not re-parsed either).
        """
        with self._lock:
            key = self._by_identity.get(id(value))
            entry = self._entries.get(key) if key is not None else None
        if entry is None or entry.value is not value:
            return self.parse(value, legacy=legacy)
        if entry.error is not None:
            raise entry.error
        assert entry.catalog is not None
        return entry.catalog

    def parse(self, value: Any, *, legacy: bool) -> Catalog:
        """Parse a ``tools`` (``legacy``: ``functions``) value, uncached.

        Raises: CatalogError (also for a tool definition over ``max_tool_bytes``).
        """
        catalog = parse_functions(value) if legacy else parse_tools(value)
        if self.max_tool_bytes is not None:
            for tool in catalog.tools:
                if tool.size_bytes > self.max_tool_bytes:
                    raise CatalogError(
                        f"tool {tool.name!r} is defined in {tool.size_bytes} bytes, over "
                        f"{self.max_tool_bytes}"
                    )
        return catalog

    def _member(self, raw: msgspec.Raw, legacy: bool) -> _Entry:
        key = ("f:" if legacy else "t:") + blake3(raw).hexdigest()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self.hits += 1
                self._entries.move_to_end(key)
                return entry
            self.misses += 1
        value = decode_value(raw)
        catalog, error = None, None
        try:
            catalog = self.parse(value, legacy=legacy)
        except CatalogError as exc:
            error = exc
        entry = _Entry(value, catalog, error, len(raw))
        with self._lock:
            raced = self._entries.get(key)  # another thread decoded the same bytes meanwhile
            if raced is not None:
                return raced
            self._insert(key, entry)
        return entry

    def _insert(self, key: str, entry: _Entry) -> None:
        self._entries[key] = entry
        self._by_identity[id(entry.value)] = key
        self._bytes += entry.size
        while len(self._entries) > 1 and (
            self._bytes > self.max_bytes or len(self._entries) > self.max_entries
        ):
            _, dropped = self._entries.popitem(last=False)
            self._bytes -= dropped.size
            self._by_identity.pop(id(dropped.value), None)

