"""A request body decoded member by member and written back from its members' bytes
(selection/catalog/body.py): the values ``json.loads`` gives, and a written body that reads
as the standard library's encoding of the same value, the client's bytes kept where the
proxy changed nothing; valid JSON the standard library refuses is no value (a body, or
model output read by ``proxy.turn.turn.json_value``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.turn.turn import json_value
from selection.catalog.body import DecodedBody, decode_object, encode_body
from selection.catalog.cache import CatalogCache

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(), JSON_VALUES, max_size=5), st.booleans())
def test_a_body_decodes_to_what_json_loads_gives(value: dict[str, Any], indent: bool) -> None:
    raw = json.dumps(value, indent=1 if indent else None, ensure_ascii=indent).encode()
    decoded = decode_object(raw)
    assert decoded == json.loads(raw)
    assert isinstance(decoded, DecodedBody)


@pytest.mark.parametrize("raw", [
    b'{"a": NaN}', b'{"a": [1e400]}', b'{"a": "\\ud800"}', b'{"a": Infinity}',
])
def test_what_msgspec_refuses_is_decoded_whole_by_the_standard_library(raw: bytes) -> None:
    decoded = decode_object(raw)
    assert type(decoded) is dict
    assert json.dumps(decoded) == json.dumps(json.loads(raw))


def test_what_is_not_an_object_is_none() -> None:
    assert decode_object(b"[1]") is None
    assert decode_object(b'{"a": ') is None
    assert decode_object(b"\xff") is None


def test_valid_json_the_standard_library_refuses_is_none() -> None:
    """An integer past Python's digits limit for ``int`` (4,300): valid JSON, no value."""
    assert decode_object(b'{"seed": ' + b"9" * 5000 + b"}") is None
    assert decode_object(b'{"seed": ' + b"9" * 4000 + b"}") == {"seed": int("9" * 4000)}


def client_body() -> tuple[bytes, DecodedBody]:
    raw = json.dumps({
        "model": "m", "stream": True, "tools": [{"type": "function", "function": {"name": "a"}}],
        "messages": [{"role": "user", "content": "hi é"},
                     {"role": "assistant", "content": "ok", "tool_calls": []}],
        "temperature": 0.5,
    }, indent=2).encode()  # spaced as some clients send it
    body = decode_object(raw)
    assert isinstance(body, DecodedBody)
    return raw, body


def test_unchanged_members_are_the_clients_bytes_and_the_rest_is_written_anew() -> None:
    raw, body = client_body()
    written = dict(body)
    written["tools"] = [{"type": "function", "function": {"name": "b"}}]
    out = encode_body(written, body)
    assert json.loads(out) == written
    assert bytes(body.raw["messages"]) in out  # the history as the client wrote it
    assert json.loads(encode_body(dict(body), body)) == json.loads(raw)


def test_a_history_with_messages_added_keeps_the_clients_bytes_before_them() -> None:
    _, body = client_body()
    appended = [{"role": "assistant", "content": None}, {"role": "tool", "content": "\u2028"}]
    written = {**body, "messages": [*body["messages"], *appended]}
    out = encode_body(written, body)
    assert json.loads(out) == written
    head = bytes(body.raw["messages"]).rstrip()[:-1].rstrip()
    assert head in out


def test_a_history_with_messages_changed_or_put_between_reads_as_written() -> None:
    _, body = client_body()
    first, second = body["messages"]
    rewritten = [{"role": "system", "content": "x"}, first, {**second, "content": "changed"}]
    written = {**body, "messages": rewritten}
    assert json.loads(encode_body(written, body)) == written
    fresh = {**body, "messages": [{"role": "user", "content": "new"}]}
    assert json.loads(encode_body(fresh, body)) == fresh


def test_a_lone_surrogate_or_a_plain_dict_is_written_by_the_standard_library() -> None:
    _, body = client_body()
    written = {**body, "messages": [*body["messages"], {"role": "tool", "content": "\ud800"}]}
    assert encode_body(written, body) == json.dumps(written).encode()
    plain = {"model": "m", "messages": [{"content": "é"}]}
    assert encode_body(plain, plain) == json.dumps(plain, ensure_ascii=False).encode()


def test_model_output_the_standard_library_cannot_read_is_not_json() -> None:
    """What an upstream answer or a model's call arguments carry is read by
    ``json_value``: an integer past Python's digits limit is unreadable JSON, never a
    ``ValueError`` its callers do not expect."""
    with pytest.raises(json.JSONDecodeError):
        json_value('{"page": ' + "9" * 5000 + "}")
    assert json_value(b'{"a": NaN}')["a"] != json_value(b'{"a": NaN}')["a"]  # the stdlib's NaN


def test_a_catalogue_member_the_standard_library_cannot_read_makes_the_body_none() -> None:
    """The ``tools`` member is decoded by the catalogue cache's own decoder: an integer
    past the digits limit in a tool's schema leaves no body to act on (forwarded as sent)."""
    raw = (b'{"model": "m", "tools": [{"type": "function", "function": {"name": "a", '
           b'"parameters": {"type": "object", "maximum": ' + b"9" * 5000 + b"}}}]}")
    assert CatalogCache(max_bytes=1 << 20).decode_body(raw) is None
