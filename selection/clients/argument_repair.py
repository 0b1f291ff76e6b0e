"""A tool call's arguments as models write them, read where the intent is unambiguous and
checked against the tool's JSON Schema.

Open-weight models write a call's arguments in a few recurring wrong ways: the object as
JSON text inside the JSON (``"arguments": "{\\"owner\\": \\"octo\\"}"``), as a Python
literal (single quotes, ``True``), as slightly broken JSON (a trailing comma, a missing
comma or quote), and nested values as strings where the schema wants a number, a boolean,
an array or an object (``"30"``, ``"[1, 2]"``: cline#11803, hermes-agent PR #52220). Each
is read here, and reported by its kind, only where one reading exists:

* :func:`object_text`: JSON first; then a Python literal (:func:`ast.literal_eval`, exact);
  then the ``json-repair`` library, only for text that opens and closes like one object
  (``{`` … ``}``: never a call cut off by the output limit, whose missing tail nobody
  knows) and that needed at most :data:`MAX_JSON_FIXES` fixes;
* :func:`coerce_strings`: a string value where the schema's ``type`` admits no string
  but a number, integer, boolean, array or object, and the string is exactly one such
  value; nested objects (``properties``) and arrays (``items``) alike.

:func:`schema_problems` checks the result with the ``jsonschema`` library (JSON Schema
Draft 2020-12 and earlier, as the schema declares); :func:`skeleton` writes a schema's
required keys as placeholders, for a refusal that shows the valid shape. Pure: no I/O.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Fixes ``json-repair`` may have logged for a text still to count as slightly broken.
MAX_JSON_FIXES = 2
#: Schema violations a refusal is told about (the first ones found).
MAX_ARGUMENT_ERRORS = 3
#: Characters of one violation's message (a huge schema or value is not echoed whole).
ARGUMENT_ERROR_CHARS = 200
#: Longest text read as a literal or repaired (characters); a longer one must be JSON.
MAX_REPAIR_CHARS = 256 * 1024
#: Deepest nesting :func:`coerce_strings` walks.
MAX_COERCE_DEPTH = 32

_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]*)")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_SCALAR_TYPES = ("integer", "number", "boolean")


@dataclass(frozen=True)
class ReadText:
    """JSON text read: ``value`` (None: no reading) and how (``kind``: ``json``,
    ``python_literal``, ``repaired_json``)."""

    value: Any
    kind: str | None


def object_text(text: str) -> ReadText:
    """``text`` read as a JSON object (see the module docstring); ``value`` None when it
    is none of the readings, or reads as something other than an object."""
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        pass
    else:
        return ReadText(value, "json") if isinstance(value, dict) else ReadText(None, None)
    stripped = text.strip()
    if len(stripped) > MAX_REPAIR_CHARS or not (stripped.startswith("{") and stripped.endswith("}")):
        return ReadText(None, None)
    try:
        literal = ast.literal_eval(stripped)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        literal = None
    if isinstance(literal, dict) and _json_like(literal):
        return ReadText(literal, "python_literal")
    return _repaired(stripped)


def _repaired(text: str) -> ReadText:
    from json_repair import repair_json  # imported on the first broken call, kept off idle memory

    try:
        value, fixes = repair_json(text, return_objects=True, logging=True)
    except (ValueError, RecursionError, IndexError, TypeError):
        return ReadText(None, None)
    if isinstance(value, dict) and value and len(fixes) <= MAX_JSON_FIXES:
        return ReadText(value, "repaired_json")
    return ReadText(None, None)


def _json_like(value: Any, depth: int = 0) -> bool:
    """Whether a Python literal is a JSON value (string keys; no tuple, set, bytes or
    complex number), so it reads as JSON would have."""
    if depth > MAX_COERCE_DEPTH:
        return False
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_like(v, depth + 1) for k, v in value.items())
    if isinstance(value, list):
        return all(_json_like(item, depth + 1) for item in value)
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or isinstance(value, str | int | bool)


def _types(schema: Mapping[str, Any]) -> set[str]:
    declared = schema.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return {t for t in declared if isinstance(t, str)}
    return set()


def coerce_strings(schema: Any, value: Any, depth: int = 0) -> tuple[Any, bool]:
    """``value`` with each string that ``schema`` wants as another type written as that
    type (see the module docstring), and whether anything changed. A string the schema
    admits (its ``type`` holds ``string``, or says nothing) is left as it is."""
    if not isinstance(schema, Mapping) or depth > MAX_COERCE_DEPTH:
        return value, False
    types = _types(schema)
    if isinstance(value, str):
        if not types or "string" in types:
            return value, False
        converted = _converted(value, types)
        if converted is _NONE:
            return value, False
        return coerce_strings(schema, converted, depth + 1)[0], True
    if isinstance(value, dict) and isinstance(schema.get("properties"), Mapping):
        properties = schema["properties"]
        changed = False
        out = {}
        for key, item in value.items():
            out[key], did = coerce_strings(properties.get(key), item, depth + 1)
            changed = changed or did
        return (out, True) if changed else (value, False)
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        pairs = [coerce_strings(schema["items"], item, depth + 1) for item in value]
        if any(did for _, did in pairs):
            return [item for item, _ in pairs], True
    return value, False


_NONE = object()


def _converted(text: str, types: set[str]) -> Any:
    """``text`` as the one value of ``types`` it spells exactly, or :data:`_NONE`."""
    word = text.strip()
    readings = []
    if "integer" in types and _INTEGER.fullmatch(word):
        readings.append(int(word))
    elif "number" in types and _NUMBER.fullmatch(word):
        number = float(word)
        if math.isfinite(number):
            readings.append(int(word) if _INTEGER.fullmatch(word) else number)
    if "boolean" in types and word in ("true", "false", "True", "False"):
        readings.append(word.lower() == "true")
    if types & {"array", "object"} and word[:1] in ("[", "{"):
        try:
            parsed = json.loads(word)
        except (json.JSONDecodeError, RecursionError):
            parsed = None
        if isinstance(parsed, list) and "array" in types or isinstance(parsed, dict) and "object" in types:
            readings.append(parsed)
    if "null" in types and word == "null":
        readings.append(None)
    return readings[0] if len(readings) == 1 else _NONE


def schema_problems(schema: Mapping[str, Any], instance: Any) -> list[str]:
    """The first :data:`MAX_ARGUMENT_ERRORS` ways ``instance`` breaks ``schema`` (each
    message cut to :data:`ARGUMENT_ERROR_CHARS`); none when it fits, or when the schema is
    not a valid JSON Schema (a client's schema is its own business)."""
    from jsonschema import SchemaError
    from jsonschema.validators import validator_for

    try:
        validator_class = validator_for(schema)
        validator_class.check_schema(schema)
        errors = validator_class(schema).iter_errors(instance)
        found = []
        for error in errors:
            where = "/".join(str(part) for part in error.absolute_path)
            found.append((f"{where}: " if where else "") + error.message[:ARGUMENT_ERROR_CHARS])
            if len(found) == MAX_ARGUMENT_ERRORS:
                break
        return found
    except (SchemaError, RecursionError, TypeError, ValueError):
        return []


def parameter_names(schema: Mapping[str, Any]) -> set[str]:
    """The names of the parameters ``schema`` (a tool's ``parameters``) declares."""
    properties = schema.get("properties")
    return {name for name in properties if isinstance(name, str)} if isinstance(properties, Mapping) else set()


def skeleton(schema: Mapping[str, Any], given: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The required keys of ``schema`` (a tool's ``parameters``), each the value ``given``
    holds for it when that fits its own schema, else a placeholder naming its type
    (``"<integer>"``); then the other keys ``given`` holds that the schema declares and
    that fit."""
    properties = schema.get("properties") if isinstance(schema.get("properties"), Mapping) else {}
    required = [key for key in schema.get("required", ()) if isinstance(key, str)] \
        if isinstance(schema.get("required"), list) else []
    given = given or {}

    def fits(key: str) -> bool:
        sub = properties.get(key)
        return key in given and (not isinstance(sub, Mapping) or not schema_problems(sub, given[key]))

    out: dict[str, Any] = {}
    for key in required:
        sub = properties.get(key)
        types = sorted(_types(sub)) if isinstance(sub, Mapping) else []
        out[key] = given[key] if fits(key) else f"<{'|'.join(types) or 'value'}>"
    for key in given:
        if key not in out and key in properties and fits(key):
            out[key] = given[key]
    return out
