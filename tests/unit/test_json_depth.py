"""A body's JSON nesting depth, read from its bytes (:mod:`proxy.http.json_depth`): the
same count ``json.loads`` would recurse, brackets inside strings and escapes aside."""

from __future__ import annotations

import json

import pytest

from proxy.http.json_depth import (
    MAX_JSON_DEPTH,
    PrefixDepths,
    body_depth,
    json_depth,
    too_deep,
)


def parsed_depth(value: object) -> int:
    """The nesting of a parsed value, counted the slow way (the reference)."""
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
    if children is None:
        return 0
    return 1 + max((parsed_depth(child) for child in children), default=0)


@pytest.mark.parametrize("value", [
    {}, [], "[[[", {"a": []}, {"a": "]]]{{{", "b": [[{"c": "\"[["}]]}, ["\\", ["\\\""], "\\\\["],
    {"k[": {"v": [1, [2, [3]]]}}, [[[]], [[[[]]]]],
])
def test_the_depth_is_the_parsed_values(value: object) -> None:
    raw = json.dumps(value).encode()
    assert json_depth(raw) == parsed_depth(json.loads(raw))


def test_a_body_is_too_deep_past_the_limit_only() -> None:
    at_limit = b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH
    assert json_depth(at_limit) == MAX_JSON_DEPTH and not too_deep(at_limit)
    assert too_deep(b"[" + at_limit + b"]")
    # Brackets in a string are text, however many.
    assert not too_deep(json.dumps({"text": "[" * 5000}).encode())


def test_a_large_array_is_measured_from_a_known_prefix_to_the_same_depth() -> None:
    """A conversation grows: each body's messages are measured after the longest prefix
    an earlier body's measure left (:class:`PrefixDepths`), to the depth of the whole."""
    prefixes = PrefixDepths()
    messages: list[object] = [{"role": "user", "content": "[" * 70_000}]
    for turn in range(6):
        # A deeper message each turn, then a shallow one: the depth rises, then holds.
        messages.append({"role": "tool", "content": "x" * 20_000, "nested": [[[[]]]] * turn})
        raw = memoryview(json.dumps(messages).encode())
        assert prefixes.depth(raw) == json_depth(bytes(raw)) == parsed_depth(messages)
    # An earlier message edited (the head bytes alike): no prefix holds, measured whole.
    edited = [messages[0], {"role": "tool", "nested": [[[[[[[[[]]]]]]]]]}, *messages[2:]]
    raw = memoryview(json.dumps(edited).encode())
    assert prefixes.depth(raw) == parsed_depth(edited)


def test_a_body_is_measured_member_by_member_to_the_same_depth() -> None:
    deep = [[[[[["x"]]]]]]
    body = {"model": "m", "messages": [{"content": "y" * 70_000, "n": deep}] * 3,
            "tools": [{"a": {"b": {}}}] * 900}
    raw = json.dumps(body).encode()
    assert body_depth(raw) == json_depth(raw) == parsed_depth(body)
    assert body_depth(b"[[[1]]]") == 3 and body_depth(b"not json [[") == 2
