"""A call of the ``call_tool`` bridge read into the call it stands for: taken as the model
wrote it where one reading exists, refused with a lesson where none does.

The bridge's shape is ``{"name": <tool>, "arguments": {…}}`` (:mod:`selection.clients.bridge`).
Models that call through such bridges at scale get it wrong in recurring ways (hermes-agent's
telemetry over ~21,700 sessions, Lexus2016/hermes-agent-evolution#1786: a tool the model
could call directly sent through the bridge, arguments that are not valid JSON, the bridge
nested in itself, the name missing; openclaw#142304: ``arguments`` nested twice;
stacklok/toolhive#5891: ``tool_name`` for ``name``, the tool's arguments beside the
bridge's keys; cline#11803: numbers and arrays written as strings). Each refusal costs a
hidden model round, so :func:`read_bridge_call` repairs, in this fixed order and each only
where the intent is unambiguous (its kind, for the metrics and the decision log, in
brackets):

1. the call as JSON text, a Python literal or slightly broken JSON (``broken_json``),
   or JSON text of JSON text (``arguments_text``): :func:`~selection.clients.argument_repair.object_text`;
2. the bridge nested in itself, one level unwrapped (``nested_bridge``);
3. ``tool_name`` / ``tool`` / ``function`` (a string, or a ``{name, arguments}`` object)
   for ``name`` (``name_key``);
4. the name written another way that resolves to exactly one tool, meta-tool or deferred
   tool (``name_spelling``: :func:`~selection.clients.name_search.spelled_names`; the
   name a delivered tool is shown by is no repair: :mod:`selection.clients.shown_names`);
5. ``parameters`` / ``input`` for ``arguments``, where the tool has no parameter of that
   name (``arguments_key``);
6. ``arguments`` as JSON text (``arguments_text``, and ``broken_json`` when it needed more);
7. ``arguments`` nested twice, where the tool has no parameter named ``arguments``
   (``arguments_nested``);
8. the tool's arguments spread beside ``name``, where every such key is a parameter of
   the tool and none is also under ``arguments`` (``spread_arguments``; a key that is not
   a parameter is never dropped: the call is refused);
9. a string where the schema wants a number, integer, boolean, array or object
   (``string_values``);

then it takes the call by what it names: a tool of the catalogue (``block_tool`` when the
block holds it: the model could have called it directly), a meta-tool (``meta_tool``: the
proxy runs it), or a tool the client defers without a definition here (``deferred_tool``:
Qwen Code's menu of MCP tools, which the client runs by name), and checks the arguments
against the tool's schema. What cannot be read one way is refused (:attr:`BridgedCall.refusal`):
the answer says what was wrong in one line, the call rewritten in the valid shape (the
model's own values where they fit, a placeholder per required key where they do not), the
closest names for an unknown name, and how to call the bridge; it never shows the malformed
shape back (models copy what an error shows them: openclaw#142304). Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from selection.catalog.catalog import Catalog
from selection.clients.argument_repair import (
    coerce_strings,
    object_text,
    parameter_names,
    schema_problems,
    skeleton,
)
from selection.clients.bridge import CALL_TOOL, how_to_call
from selection.clients.meta_tools import MetaTools, answer_text, closest_names
from selection.clients.name_search import spelled_names
from selection.clients.shown_names import delivered_tool, shown_name, tool_shown_as

#: Keys a model writes for the tool's name, in the order they are read.
NAME_KEYS = ("tool_name", "tool", "function")
#: Keys a model writes for the tool's arguments, in the order they are read.
ARGUMENT_KEYS = ("parameters", "input")
#: Keys of a call's envelope a model copies beside the bridge's own (dropped unless the
#: tool has a parameter of that name).
ENVELOPE_KEYS = ("type", "id", "call_id")
#: Characters of an unknown name a refusal repeats.
NAME_CHARS = 128


@dataclass(frozen=True)
class BridgeTargets:
    """What a bridge call may name: the tools of ``catalog`` (``block``: those the block
    holds; ``delivered``: those the conversation's results delivered), the meta-tools by
    name with their ``parameters`` schema (``meta``), and the names the client defers
    without giving their definition (``menu``). ``bridge``: the bridge's name, as a
    refusal names it."""

    catalog: Catalog
    bridge: str = CALL_TOOL
    meta: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    block: frozenset[str] = frozenset()
    menu: frozenset[str] = frozenset()
    delivered: frozenset[str] = frozenset()

    def shown(self, name: str) -> str:
        """``name`` as the model knows it: a block tool's name, else the name a delivery
        shows it by (:mod:`selection.clients.shown_names`)."""
        return name if name in self.block else shown_name(name, self.catalog)

    def parameters(self, name: str) -> Mapping[str, Any] | None:
        """The parameters schema of tool or meta-tool ``name`` (None: a deferred name)."""
        tool = self.catalog.get(name)
        if tool is not None:
            return tool.parameters
        return self.meta.get(name)

    def known(self, name: str) -> bool:
        return self.catalog.get(name) is not None or name in self.meta or name in self.menu

    @property
    def names(self) -> list[str]:
        return list(dict.fromkeys([*self.catalog.names, *self.meta, *sorted(self.menu)]))


@dataclass(frozen=True)
class BridgedCall:
    """A bridge call read: the call it stands for (``name``, ``arguments`` as JSON object
    text; ``runs_meta``: ``name`` is a meta-tool's, which the proxy runs), or why it
    cannot be made (``error``: the answer the model gets, JSON text; ``refusal``: its
    kind). ``repairs``: the kinds of what was repaired or taken on the way, in order."""

    name: str | None
    arguments: str
    error: str | None = None
    repairs: tuple[str, ...] = ()
    refusal: str | None = None
    runs_meta: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def client_call(self) -> bool:
        """Whether it becomes a call the client gets (not refused, not a meta-tool's)."""
        return self.ok and self.name is not None and not self.runs_meta

    def report(self) -> dict[str, Any]:
        """The decision log's entry (no argument values): what it became and how."""
        if not self.ok:
            return {"refused": self.refusal, "repairs": list(self.repairs)}
        return {"made": self.name, "repairs": list(self.repairs)}


class _Refused(Exception):
    def __init__(self, kind: str, message: str, name: str | None = None,
                 arguments: Any = None, **detail: Any) -> None:
        super().__init__(message)
        self.kind, self.message, self.name = kind, message, name
        self.arguments, self.detail = arguments, detail


def read_bridge_call(arguments: str, targets: BridgeTargets) -> BridgedCall:
    """The call a bridge call stands for (``arguments``: the bridge call's JSON text, as
    the model wrote it), repaired where one reading exists, else refused (see the module
    docstring)."""
    repairs: list[str] = []
    try:
        name, inner = _read(arguments, targets, repairs)
    except _Refused as refused:
        return _refusal(refused, targets, repairs)
    runs_meta = name in targets.meta and targets.catalog.get(name) is None
    return BridgedCall(name, json.dumps(inner, ensure_ascii=False), repairs=tuple(repairs),
                       runs_meta=runs_meta)


def _read(arguments: str, targets: BridgeTargets, repairs: list[str]) -> tuple[str, dict[str, Any]]:
    call = _object(arguments or "{}", repairs, outer=True)
    if call is None:
        raise _Refused("unreadable", "the call is not a JSON object (cut off, or not JSON)")
    name = _name(call, repairs)
    if name is not None and name == targets.bridge:  # the bridge called through itself
        nested = _object(call.pop("arguments", None), repairs)
        name = _name(nested, repairs) if nested is not None else None
        if name is None or name == targets.bridge:
            raise _Refused("nested_bridge", f"{targets.bridge} was called through itself")
        repairs.append("nested_bridge")
        call = nested
    if name is None:
        raise _Refused("no_name", 'the call names no tool: its name goes under "name"',
                       arguments=_given_arguments(call))
    name = _resolved(name, targets, repairs, call)
    parameters = targets.parameters(name)
    names = (name, targets.shown(name))  # its name, and the name the model knows it by
    inner = _arguments(call, names, parameters, repairs)
    inner = _spread(call, names, parameters, inner, repairs)
    if parameters is not None:
        inner, coerced = coerce_strings(parameters, inner)
        if coerced:
            repairs.append("string_values")
        problems = schema_problems(parameters, inner)
        if problems:
            raise _Refused("off_schema", f"the arguments do not fit {targets.shown(name)}'s parameters",
                           name, inner, problems=problems, parameters=dict(parameters))
    taken = _taken(name, targets)
    if taken is not None:
        repairs.append(taken)
    return name, inner


def _object(value: Any, repairs: list[str], *, outer: bool = False) -> dict[str, Any] | None:
    """``value`` (an object, or its text) as an object, the repairs it needed noted;
    None when it reads as no object. An empty text is the empty object."""
    if isinstance(value, dict):
        return value
    if not isinstance(value, str):
        return None
    if not value.strip():
        return {}
    read = object_text(value)
    if read.value is None and value.strip()[:1] == '"':  # JSON text of JSON text
        try:
            text = json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            text = None
        if isinstance(text, str):
            read = object_text(text)
            if read.value is not None:
                repairs.append("arguments_text")
    if read.value is None:
        return None
    if read.kind != "json":
        repairs.append("broken_json")
    elif not outer and "arguments_text" not in repairs:
        repairs.append("arguments_text")
    return read.value


def _name(call: dict[str, Any], repairs: list[str]) -> str | None:
    """The name the call gives (``name``, else the first of :data:`NAME_KEYS` it has),
    taken out of ``call``; a ``function`` object's ``arguments`` become the call's."""
    if "name" in call:
        name = call.pop("name")
        return name if isinstance(name, str) and name.strip() else None
    for key in NAME_KEYS:
        if key not in call:
            continue
        value = call[key]
        if isinstance(value, Mapping) and isinstance(value.get("name"), str) and "arguments" not in call:
            call.pop(key)
            call["arguments"] = value.get("arguments", value.get("parameters", {}))
            repairs.append("name_key")
            return str(value["name"])
        if isinstance(value, str) and value.strip():
            call.pop(key)
            repairs.append("name_key")
            return value
    return None


def _resolved(name: str, targets: BridgeTargets, repairs: list[str], call: dict[str, Any]) -> str:
    if targets.known(name):
        return name
    shown_as = tool_shown_as(name, targets.catalog) or delivered_tool(name, targets.delivered)
    if shown_as is not None:  # the name a delivery showed, now or earlier in the conversation
        return shown_as
    spelled = spelled_names(name, targets.names)
    if len(spelled) == 1:
        repairs.append("name_spelling")
        return spelled[0]
    shown = name[:NAME_CHARS]
    if spelled:
        raise _Refused("ambiguous_name", f"{shown!r} could be any of several tools",
                       arguments=_given_arguments(call),
                       did_you_mean=[targets.shown(name) for name in spelled[:5]])
    raise _Refused("unknown_name", f"no tool is named {shown!r}", arguments=_given_arguments(call),
                   did_you_mean=[targets.shown(name) for name in closest_names(shown, targets.names)])


def _arguments(call: dict[str, Any], names: tuple[str, str], parameters: Mapping[str, Any] | None,
               repairs: list[str]) -> dict[str, Any]:
    """The call's arguments object (see steps 5–7 of the module docstring); ``names``: the
    tool's name and the name the model knows it by (:meth:`BridgeTargets.shown`)."""
    own = parameter_names(parameters) if parameters is not None else set()
    if "arguments" in call:
        given = call.pop("arguments")
    else:
        key = next((k for k in ARGUMENT_KEYS if k in call and k not in own), None)
        if key is None:
            return {}
        given = call.pop(key)
        repairs.append("arguments_key")
    if given is None:
        return {}
    inner = _object(given, repairs)
    if inner is None:
        raise _Refused("arguments_not_object",
                       f"the arguments of {names[1]} must be a JSON object", names[0], {})
    if "arguments" not in own and set(inner) == {"arguments"} or (
        set(inner) == {"name", "arguments"} and inner["name"] in names and "name" not in own
    ):
        nested = _object(inner["arguments"], repairs)
        if nested is not None:
            repairs.append("arguments_nested")
            return dict(nested)
    return dict(inner)


def _spread(call: dict[str, Any], names: tuple[str, str], parameters: Mapping[str, Any] | None,
            inner: dict[str, Any], repairs: list[str]) -> dict[str, Any]:
    """``inner`` with the tool's arguments the call wrote beside its name (step 8;
    ``names`` as for :func:`_arguments`)."""
    own = parameter_names(parameters) if parameters is not None else set()
    stray = {key: value for key, value in call.items()
             if key in own or not (key in ENVELOPE_KEYS or key in NAME_KEYS and value in names)}
    if not stray:
        return inner
    unknown = sorted(key for key in stray if key not in own)
    both = sorted(key for key in stray if key in inner)
    if unknown or both:
        merged = {**stray, **inner}
        what = (f"{', '.join(map(repr, unknown))} {'is not a parameter' if len(unknown) == 1 else 'are not parameters'} of {names[1]}"
                if unknown else f"{', '.join(map(repr, both))} given twice, beside and under \"arguments\"")
        raise _Refused("stray_keys", what, names[0], merged,
                       **({"parameters": dict(parameters)} if parameters is not None else {}))
    repairs.append("spread_arguments")
    return {**inner, **stray}


def _taken(name: str, targets: BridgeTargets) -> str | None:
    """What the call is taken as when it names no tool outside the block (the bridge's
    purpose: None): a tool of the block, a meta-tool, or a deferred tool."""
    if targets.catalog.get(name) is not None:
        return "block_tool" if name in targets.block else None
    return "meta_tool" if name in targets.meta else "deferred_tool"


def _given_arguments(call: dict[str, Any]) -> dict[str, Any]:
    """The arguments a refused call gave, when they are an object (else none)."""
    given = call.get("arguments")
    return dict(given) if isinstance(given, dict) else {}


def _refusal(refused: _Refused, targets: BridgeTargets, repairs: list[str]) -> BridgedCall:
    """The answer to a refused call (see the module docstring): the call in the valid
    shape, with the model's values where they fit."""
    name = refused.name
    parameters = targets.parameters(name) if name is not None else None
    arguments = refused.arguments if isinstance(refused.arguments, dict) else {}
    if parameters is not None:
        arguments = skeleton(parameters, arguments)
    if name is None:
        name_to_write = ("<one of did_you_mean>" if refused.detail.get("did_you_mean")
                         else "<the tool's name>")
    else:
        name_to_write = targets.shown(name)
    answer = {
        "error": refused.message,
        **refused.detail,
        "call_it_so": {"name": name_to_write, "arguments": arguments},
        "how_to_call": how_to_call(targets.bridge),
    }
    return BridgedCall(name, "{}", answer_text(answer),
                       tuple(repairs), refused.kind)


def bridge_targets(
    catalog: Catalog, bridge: str, meta: MetaTools | None = None,
    block: Sequence[str] = (), menu: Sequence[str] = (), delivered: Sequence[str] = (),
) -> BridgeTargets:
    """The :class:`BridgeTargets` of a plan: ``meta``, the meta-tools offered (those a
    bridge call may run: ``load_tools`` and ``search_tools``, by their definitions in
    OpenAI's function-tool shape or as legacy ``functions`` entries); ``delivered``, the
    tools the conversation's results delivered (those still in ``catalog``)."""
    runnable = {meta.load_name, meta.search_name} - {None} if meta is not None else set()
    schemas: dict[str, Mapping[str, Any]] = {}
    for definition in meta.definitions if meta is not None else ():
        function = definition.get("function", definition)
        if isinstance(function, Mapping) and function.get("name") in runnable:
            parameters = function.get("parameters")
            schemas[function["name"]] = parameters if isinstance(parameters, Mapping) else {}
    return BridgeTargets(catalog, bridge, schemas, frozenset(block),
                         frozenset(name for name in menu if catalog.get(name) is None),
                         frozenset(name for name in delivered if catalog.get(name) is not None))
