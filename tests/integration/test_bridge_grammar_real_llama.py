"""The bridge's schema lets a model write any object as ``arguments`` under llama.cpp's
JSON-schema-to-grammar, checked on a real llama-server: generation constrained by the
bridge's ``parameters`` (``POST /completion`` with ``json_schema``) copies a call with keys
under ``arguments``, while the shape hermes-agent#96610 reported (``properties: {}``
without ``additionalProperties: true``) compiles to the empty object only, so the same
prompt gets ``{}``: the check can tell them apart.

Marked ``real_upstream``: run with ``pytest -m real_upstream`` (builds llama-server on
first use). Greedy decoding (``benchmarks.support.llama.DETERMINISTIC``): SmolLM2 copies
the call the prompt repeats, within what the grammar admits.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from benchmarks.support.llama import llama_server
from selection.clients.bridge import CALL_TOOL, bridge_definition

pytestmark = pytest.mark.real_upstream

CALL = {"name": "list_issues", "arguments": {"owner": "octo", "repo": "widgets"}}
PROMPT = f"{CALL_TOOL} {json.dumps(CALL)}\n" * 4 + f"{CALL_TOOL} "


@pytest.fixture(scope="module")
def llama() -> Iterator[str]:
    with llama_server() as origin:
        yield origin


def constrained(llama: str, schema: dict[str, Any]) -> Any:
    """What the model writes after :data:`PROMPT` under ``schema``'s grammar, as JSON."""
    response = httpx.post(llama + "/completion", timeout=600, json={
        "prompt": PROMPT, "n_predict": 48, "json_schema": schema, "temperature": 0})
    response.raise_for_status()
    return json.loads(response.json()["content"])


def test_the_bridges_arguments_compile_to_any_object(llama: str) -> None:
    parameters = bridge_definition(CALL_TOOL, legacy=False)["function"]["parameters"]
    assert constrained(llama, parameters) == CALL
    closed = copy.deepcopy(parameters)
    closed["properties"]["arguments"]["properties"] = {}  # hermes-agent#96610's shape
    assert constrained(llama, closed) == {"name": "list_issues", "arguments": {}}
