"""A body's JSON nesting depth, read from its bytes (:mod:`proxy.http.json_depth`): the
same count ``json.loads`` would recurse, brackets inside strings and escapes aside."""

from __future__ import annotations

import json

import pytest

from proxy.http.json_depth import MAX_JSON_DEPTH, json_depth, too_deep


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
