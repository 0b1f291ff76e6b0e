"""Request bodies decoded with the catalogue parsed once: same result as ``json.loads``,
the catalogue from the cache when its raw bytes repeat, bounded, and odd bodies decoded
as the standard library decodes them."""

from __future__ import annotations

import json

import pytest

from selection.catalog.cache import CatalogCache
from selection.catalog.catalog import parse_tools
from selection.errors import CatalogError


def tools(n: int, prefix: str = "t") -> list[dict]:
    return [
        {"type": "function", "function": {"name": f"{prefix}{i}", "description": f"tool {i}"}}
        for i in range(n)
    ]


def body(n: int = 20, query: str = "hi", prefix: str = "t") -> bytes:
    return json.dumps({"model": "m", "messages": [{"role": "user", "content": query}],
                       "tools": tools(n, prefix), "stream": True}).encode()


def test_a_body_decodes_as_json_loads_decodes_it() -> None:
    cache = CatalogCache(1 << 20)
    raw = body()
    assert cache.decode_body(raw) == json.loads(raw)


def test_a_repeated_catalogue_is_decoded_and_parsed_once() -> None:
    cache = CatalogCache(1 << 20)
    first = cache.decode_body(body(query="one"))
    second = cache.decode_body(body(query="two"))
    assert first is not None and second is not None
    assert second["tools"] is first["tools"]  # the shared decoded list
    assert (cache.hits, cache.misses) == (1, 1)
    catalog = cache.catalog(second["tools"], legacy=False)
    assert catalog is cache.catalog(first["tools"], legacy=False)
    assert catalog.fingerprint == parse_tools(tools(20)).fingerprint


def test_a_list_the_cache_did_not_decode_is_parsed_anew() -> None:
    cache = CatalogCache(1 << 20)
    assert cache.catalog(tools(3), legacy=False).names == ["t0", "t1", "t2"]


def test_a_malformed_catalogue_raises_every_time_without_reparsing() -> None:
    cache = CatalogCache(1 << 20)
    raw = json.dumps({"messages": [], "tools": [{"type": "function", "function": {}}]}).encode()
    for _ in range(2):
        decoded = cache.decode_body(raw)
        assert decoded is not None
        with pytest.raises(CatalogError):
            cache.catalog(decoded["tools"], legacy=False)
    assert cache.misses == 1


def test_the_cache_is_bounded_by_raw_bytes_keeping_the_newest() -> None:
    one = len(json.dumps(tools(20)))
    cache = CatalogCache(2 * one + 10)
    for prefix in ("a", "b", "c"):
        cache.decode_body(body(prefix=prefix))
    assert len(cache) == 2
    tiny = CatalogCache(0)
    decoded = tiny.decode_body(body())
    assert decoded is not None and len(tiny) == 1  # the newest entry stays
    assert tiny.catalog(decoded["tools"], legacy=False) is tiny.catalog(decoded["tools"], legacy=False)


def test_an_oversized_tool_definition_is_a_catalog_error() -> None:
    cache = CatalogCache(1 << 20, max_tool_bytes=1024)
    big = [{"type": "function", "function": {"name": "big", "description": "x" * 5000}}]
    decoded = cache.decode_body(json.dumps({"messages": [], "tools": big}).encode())
    assert decoded is not None
    with pytest.raises(CatalogError, match="over 1024"):
        cache.catalog(decoded["tools"], legacy=False)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"messages": [], "tools": [{"type": "function", "function": {"name": "\\ud800"}}]}',
        b'{"messages": [], "temperature": NaN, "tools": []}',
        b'{"tools": [], "tools": [{"type": "x"}]}',
        b'{"n": 123456789012345678901234567890}',
        b'{"a": ' + b"[" * 900 + b"]" * 900 + b"}",
    ],
)
def test_odd_bodies_decode_as_the_standard_library_decodes_them(raw: bytes) -> None:
    assert CatalogCache(1 << 20).decode_body(raw) == json.loads(raw)


@pytest.mark.parametrize("raw", [b"[1, 2]", b"not json", b"\xff\xfe"])
def test_what_is_not_a_json_object_decodes_to_none(raw: bytes) -> None:
    assert CatalogCache(1 << 20).decode_body(raw) is None


def test_a_body_nested_deeper_than_the_decoder_follows_raises_recursion_error() -> None:
    # the caller refuses it (400 request_too_deeply_nested), rather than forwarding
    # bytes it could not read
    with pytest.raises(RecursionError):
        CatalogCache(1 << 20).decode_body(b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")


def test_legacy_functions_are_cached_apart_from_tools() -> None:
    cache = CatalogCache(1 << 20)
    functions = [entry["function"] for entry in tools(10)]
    decoded = cache.decode_body(json.dumps({"messages": [], "functions": functions}).encode())
    assert decoded is not None
    catalog = cache.catalog(decoded["functions"], legacy=True)
    assert catalog.legacy and len(catalog) == 10


async def test_the_chat_adapter_decodes_and_reads_through_one_cache() -> None:
    from proxy.apis.chat.adapter import ChatApi

    cache = CatalogCache(1 << 20)
    api = ChatApi(cache)
    raw = json.dumps({"messages": [{"role": "user", "content": "x"}], "tools": tools(10)}).encode()
    first, second = [(await api.read(await api.decode(raw))).input.native for _ in range(2)]
    assert first is not None and first is second
    assert (cache.hits, cache.misses) == (1, 1)
