"""The shapes models write bridge calls in: a scripted model that misbehaves as real ones
do, for ``benchmarks.bridge_shapes``.

Each :class:`Shape` writes a call of the ``call_tool`` bridge (its arguments' JSON text)
for a tool and its arguments, the way projects that run such bridges at scale reported
models writing them. The sources: hermes-agent's telemetry over ~21,700 sessions
(Lexus2016/hermes-agent-evolution#1786), openclaw#142304 and #138141,
stacklok/toolhive#5891, hermes-agent PR #101004, #52220 and #110442, cline#11803.
``recovery`` is what a model that was refused writes next (the correct shape): one more
round where the proxy refuses.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Writer = Callable[[str, dict[str, Any]], str]


@dataclass(frozen=True)
class Shape:
    """One way of writing a bridge call: its ``name``, where it was reported
    (``source``), and ``write(tool, arguments)`` → the bridge call's arguments text."""

    name: str
    source: str
    write: Writer


def correct(tool: str, arguments: dict[str, Any]) -> str:
    return json.dumps({"name": tool, "arguments": arguments})


def _stringly(arguments: dict[str, Any]) -> dict[str, Any]:
    """Every number and boolean written as a string (as open-weight models do)."""
    return {key: json.dumps(value) if isinstance(value, bool | int | float) else value
            for key, value in arguments.items()}


SHAPES: tuple[Shape, ...] = (
    Shape("correct", "the bridge's own shape", correct),
    Shape("arguments as JSON text", "hermes-agent#1786 (16%: not valid JSON)",
          lambda t, a: json.dumps({"name": t, "arguments": json.dumps(a)})),
    Shape("arguments as a Python literal", "hermes-agent#1786",
          lambda t, a: json.dumps({"name": t, "arguments": repr(a)})),
    Shape("trailing comma", "hermes-agent#1786",
          lambda t, a: correct(t, a)[:-2] + ",}}"),
    Shape("bridge nested in itself", "hermes-agent#1786 (14%)",
          lambda t, a: json.dumps({"name": "call_tool", "arguments": {"name": t, "arguments": a}})),
    Shape("arguments nested twice", "openclaw#142304",
          lambda t, a: json.dumps({"name": t, "arguments": {"arguments": a}})),
    Shape("tool_name for name", "stacklok/toolhive#5891",
          lambda t, a: json.dumps({"tool_name": t, "arguments": a})),
    Shape("parameters for arguments", "stacklok/toolhive#5891",
          lambda t, a: json.dumps({"name": t, "parameters": a})),
    Shape("arguments spread beside name", "stacklok/toolhive#5891, hermes-agent PR #101004",
          lambda t, a: json.dumps({"tool": t, **a})),
    Shape("values written as strings", "cline#11803, hermes-agent PR #52220",
          lambda t, a: correct(t, _stringly(a))),
    Shape("a namespace the catalogue lacks", "models naming MCP tools as their client does",
          lambda t, a: correct(f"mcp__browser__{t}", a)),
    Shape("the name in words", "models writing a tool's title",
          lambda t, a: correct(t.replace("_", " ").title(), a)),
    Shape("no name", "hermes-agent#1786 (7%)",
          lambda t, a: json.dumps({"arguments": a})),
    Shape("cut off", "a call cut by the output limit",
          lambda t, a: correct(t, a)[:-6]),
)
