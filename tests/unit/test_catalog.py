"""Tests for selection.catalog.catalog: parsing ``tools`` / legacy ``functions``, hostile input,
fingerprints, name words and parameter texts."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from selection.catalog.catalog import (
    Catalog,
    build_catalog,
    fingerprint,
    name_words,
    parse_functions,
    parse_tools,
)
from selection.errors import CatalogError, SelectionError


def function(name: str, description: str | None = None, **extra: Any) -> dict[str, Any]:
    inner: dict[str, Any] = {"name": name}
    if description is not None:
        inner["description"] = description
    inner.update(extra)
    return {"type": "function", "function": inner}


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name"},
                "unitSystem": {"type": "string", "enum": ["metric", "imperial"]},
            },
            "required": ["city"],
        },
        "strict": True,
    },
}


# --------------------------------------------------------------------------- parsing


def test_tools_parse_into_name_description_parameters_and_definition() -> None:
    catalog = parse_tools([WEATHER, function("send_email", "Send an email.")])
    assert catalog.names == ["get_weather", "send_email"]
    assert len(catalog) == 2
    weather = catalog.tools[0]
    assert weather.description == "Current weather for a city."
    assert weather.parameters == WEATHER["function"]["parameters"]
    assert weather.definition is WEATHER
    assert weather.fingerprint == fingerprint(WEATHER)
    assert catalog.legacy is False
    assert catalog.others == ()


def test_catalogue_lookup_by_name() -> None:
    catalog = parse_tools([function("a"), function("b")])
    assert catalog.index_of("b") == 1
    assert catalog.index_of("zzz") is None
    assert catalog.get("a") is catalog.tools[0]
    assert catalog.get("zzz") is None


def test_an_entry_without_type_is_a_function_tool() -> None:
    catalog = parse_tools([{"function": {"name": "untyped"}}])
    assert catalog.names == ["untyped"]


def test_missing_or_null_description_and_parameters_default_to_empty() -> None:
    catalog = parse_tools(
        [
            function("a"),
            function("b", None, parameters=None),
            {"type": "function", "function": {"name": "c", "description": None}},
        ]
    )
    for tool in catalog.tools:
        assert tool.description == ""
        assert dict(tool.parameters) == {}


def test_legacy_functions_parse_with_the_function_object_as_definition() -> None:
    legacy = [WEATHER["function"], {"name": "send_email", "description": "Send an email."}]
    catalog = parse_functions(legacy)
    assert catalog.legacy is True
    assert catalog.names == ["get_weather", "send_email"]
    assert catalog.tools[0].definition is legacy[0]
    assert catalog.tools[0].parameters == WEATHER["function"]["parameters"]


def test_legacy_and_tools_catalogues_of_the_same_functions_fingerprint_differently() -> None:
    as_tools = parse_tools([{"type": "function", "function": {"name": "a"}}])
    as_legacy = parse_functions([{"name": "a"}])
    assert as_tools.fingerprint != as_legacy.fingerprint


def test_non_function_entries_are_kept_in_others_and_never_pruned() -> None:
    builtin = {"type": "web_search_preview", "search_context_size": "low"}
    custom = {"type": "custom", "custom": {"name": "grammar_tool"}}
    catalog = parse_tools([builtin, WEATHER, custom, function("b")])
    assert catalog.names == ["get_weather", "b"]
    assert catalog.others == (builtin, custom)
    # Restricting the catalogue (pruning) keeps every non-function entry as it is.
    restricted = catalog.restricted_to({"b"})
    assert restricted.names == ["b"]
    assert restricted.others == (builtin, custom)
    assert catalog.restricted_to(set()).others == (builtin, custom)


def test_non_function_entries_do_not_change_the_catalogue_fingerprint() -> None:
    plain = parse_tools([WEATHER])
    with_other = parse_tools([WEATHER, {"type": "web_search_preview"}])
    assert plain.fingerprint == with_other.fingerprint


def test_restricted_to_keeps_catalogue_order_and_legacy_flag() -> None:
    catalog = parse_functions([{"name": n} for n in ["a", "b", "c", "d"]])
    restricted = catalog.restricted_to({"d", "b", "ghost"})
    assert restricted.names == ["b", "d"]
    assert restricted.legacy is True
    assert restricted.index_of("d") == 1


def test_an_empty_tools_array_is_an_empty_catalogue() -> None:
    catalog = parse_tools([])
    assert len(catalog) == 0 and catalog.names == [] and catalog.fingerprint


# --------------------------------------------------------------------------- hostile input


@pytest.mark.parametrize(
    "tools",
    [
        None,
        {"type": "function", "function": {"name": "a"}},
        "tools",
        42,
        [None],
        ["a string"],
        [[{"type": "function", "function": {"name": "a"}}]],
        [{"type": "function"}],
        [{"type": "function", "function": None}],
        [{"type": "function", "function": "get_me"}],
        [{"type": "function", "function": {}}],
        [{"type": "function", "function": {"name": ""}}],
        [{"type": "function", "function": {"name": None}}],
        [{"type": "function", "function": {"name": 7}}],
        [function("a", 12)],
        [function("a", ["list"])],
        [function("a", {"text": "obj"})],
        [function("a", "ok", parameters=[])],
        [function("a", "ok", parameters="{}")],
        [function("a", "ok", parameters=3)],
        [function("dup"), function("dup")],
        [function("dup"), {"type": "other"}, function("dup", "again")],
    ],
    ids=lambda value: json.dumps(value)[:60],
)
def test_malformed_tools_raise_catalog_error(tools: Any) -> None:
    with pytest.raises(CatalogError):
        parse_tools(tools)


@pytest.mark.parametrize("name", ["github/create_issue", "has space", "x" * 129, "émoji_✓"])
def test_names_are_opaque_strings_matched_exactly(name: str) -> None:
    catalog = parse_tools([function(name), function("other")])
    assert catalog.names == [name, "other"]
    assert catalog.get(name) is not None and catalog.get(name.upper() + "?") is None


@pytest.mark.parametrize(
    "functions",
    [
        None,
        {"name": "a"},
        [None],
        ["get_me"],
        [{"description": "nameless"}],
        [{"name": "a", "description": 1}],
        [{"name": "a", "parameters": ["x"]}],
        [{"name": "a"}, {"name": "a"}],
    ],
    ids=lambda value: json.dumps(value)[:60],
)
def test_malformed_legacy_functions_raise_catalog_error(functions: Any) -> None:
    with pytest.raises(CatalogError):
        parse_functions(functions)


def test_catalog_error_is_a_selection_error_with_a_reason() -> None:
    with pytest.raises(SelectionError) as caught:
        parse_tools("nope")
    assert caught.value.reason == "catalog_error"


@pytest.mark.parametrize("name", ["a", "get_me", "A-b.c:d_9", "x" * 128, "mcp__github__get_me"])
def test_valid_names_are_accepted(name: str) -> None:
    assert parse_tools([function(name)]).names == [name]


def test_a_name_with_a_trailing_newline_is_its_own_name() -> None:
    catalog = parse_tools([function("get_me\n"), function("get_me")])
    assert catalog.names == ["get_me\n", "get_me"]


def test_a_lone_surrogate_in_a_description_is_parsed_and_fingerprinted() -> None:
    tools = json.loads(
        '[{"type": "function", "function": {"name": "a", "description": "x\\ud800"}}]'
    )
    catalog = parse_tools(tools)
    assert catalog.tools[0].description == "x\ud800"
    assert catalog.fingerprint == parse_tools(tools).fingerprint


def test_build_catalog_rejects_duplicate_names() -> None:
    tool = parse_tools([function("a")]).tools[0]
    with pytest.raises(CatalogError):
        build_catalog([tool, tool])


# JSON-like values as a client could send them.
_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_text, children, max_size=4),
    max_leaves=20,
)
_entry = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["function", "web_search", None, 3]),
        "function": st.one_of(
            _json,
            st.fixed_dictionaries(
                {"name": st.one_of(st.sampled_from(["a", "b", "get_me", "bad name", ""]), _json)},
                optional={"description": _json, "parameters": _json, "strict": _json},
            ),
        ),
    },
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.one_of(_json, st.lists(st.one_of(_entry, _json), max_size=5)))
def test_property_any_json_either_parses_or_raises_catalog_error(tools: Any) -> None:
    try:
        catalog = parse_tools(tools)
    except CatalogError:
        return
    assert isinstance(catalog, Catalog)
    assert len(set(catalog.names)) == len(catalog.names)
    assert len(catalog.tools) + len(catalog.others) == len(tools)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.one_of(
        _json, st.lists(st.one_of(_entry.map(lambda e: e.get("function")), _json), max_size=5)
    )
)
def test_property_any_json_either_parses_as_functions_or_raises_catalog_error(
    functions: Any,
) -> None:
    try:
        catalog = parse_functions(functions)
    except CatalogError:
        return
    assert len(catalog.tools) == len(functions)


# --------------------------------------------------------------------------- fingerprints


def test_fingerprint_is_stable_under_key_order() -> None:
    one = {
        "type": "function",
        "function": {
            "name": "a",
            "description": "d",
            "parameters": {
                "type": "object",
                "properties": {"x": {"type": "string"}, "y": {"type": "integer"}},
            },
        },
    }
    two = {
        "function": {
            "parameters": {
                "properties": {"y": {"type": "integer"}, "x": {"type": "string"}},
                "type": "object",
            },
            "description": "d",
            "name": "a",
        },
        "type": "function",
    }
    assert fingerprint(one) == fingerprint(two)
    assert parse_tools([one]).fingerprint == parse_tools([two]).fingerprint


def test_fingerprint_changes_with_any_value() -> None:
    base = function("a", "desc")
    changed = function("a", "desc.")
    assert fingerprint(base) != fingerprint(changed)
    assert parse_tools([base]).fingerprint != parse_tools([changed]).fingerprint


def test_catalogue_fingerprint_depends_on_tool_order() -> None:
    a, b = function("a"), function("b")
    assert parse_tools([a, b]).fingerprint != parse_tools([b, a]).fingerprint


def test_fingerprint_is_a_sha256_hex_digest_of_canonical_json() -> None:
    import hashlib

    value = {"b": [1, "é"], "a": None}
    expected = hashlib.sha256('{"a":null,"b":[1,"é"]}'.encode()).hexdigest()
    assert fingerprint(value) == expected


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.dictionaries(_text, _json, max_size=6))
def test_property_fingerprint_ignores_key_order(value: dict[str, Any]) -> None:
    reordered = dict(reversed(list(value.items())))
    assert fingerprint(value) == fingerprint(reordered)
    assert fingerprint(value) == fingerprint(json.loads(json.dumps(value)))


# --------------------------------------------------------------------------- words


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("get_pull_request", "get pull request"),
        ("getPullRequest", "get Pull Request"),
        ("GetPullRequest", "Get Pull Request"),
        ("github__get_pr", "github get pr"),
        ("mcp__github__get_me", "mcp github get me"),
        ("getHTTPResponse", "get HTTP Response"),
        ("HTTPServer", "HTTP Server"),
        ("browser.navigate-back:now", "browser navigate back now"),
        ("list_issues2", "list issues2"),
        ("v2Api", "v2 Api"),
        ("__private__", "private"),
        ("single", "single"),
        ("github/create_issue", "github create issue"),
    ],
)
def test_name_words_split_snake_camel_and_namespaced_names(name: str, words: str) -> None:
    assert name_words(name) == words


# --------------------------------------------------------------------------- parameters


def test_parameter_texts_are_name_words_and_descriptions_in_schema_order() -> None:
    tool = parse_tools([WEATHER]).tools[0]
    assert tool.parameter_texts() == ["city: City name", "unit System"]


def test_parameter_texts_skip_missing_or_non_string_descriptions() -> None:
    tool = parse_tools(
        [
            function(
                "t",
                parameters={
                    "type": "object",
                    "properties": {
                        "repo_name": {"type": "string", "description": ""},
                        "count": {"type": "integer", "description": 3},
                        "weird": True,
                        "owner": {"description": "Repository owner"},
                    },
                },
            )
        ]
    ).tools[0]
    assert tool.parameter_texts() == ["repo name", "count", "weird", "owner: Repository owner"]


@pytest.mark.parametrize(
    "parameters",
    [{}, {"type": "object"}, {"type": "object", "properties": []}, {"properties": "x"}],
)
def test_parameter_texts_without_properties_object_are_empty(parameters: dict) -> None:
    tool = parse_tools([function("t", parameters=parameters)]).tools[0]
    assert tool.parameter_texts() == []
