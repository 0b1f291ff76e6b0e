"""Labelled cases for ``toolprune eval``: reading a set, its catalogues, its conversations,
and the k sweep.

Cases follow docs/eval-format.md: one JSON object per line with ``id``,
``messages``, ``tools`` (or ``catalog``: a file relative to the set's folder holding the
``tools`` array), ``expected`` (tool names; ``[]`` means no tool should be called) and
optionally ``expected_any_of`` (a list of alternatives; each inner list is one more
required tool, satisfied by any of its members).
"""

from __future__ import annotations

import json
import random
import re
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from selection.catalog.catalog import Catalog, parse_tools
from selection.errors import CatalogError

ALL = None
DEFAULT_KS: tuple[int | None, ...] = (1, 2, 4, 8, 16, 32, ALL)

_CALL_SUFFIX = re.compile(r"^(?P<conversation>.+)_call\d+$")
_STEP_SUFFIX = re.compile(r"^(?P<conversation>.+)_t\d+_s\d+$")


def parse_ks(text: str) -> tuple[int | None, ...]:
    """``"1,2,4,all"`` → ``(1, 2, 4, None)``. Raises ValueError."""
    ks: list[int | None] = []
    for item in text.split(","):
        item = item.strip().lower()
        if not item:
            continue
        if item == "all":
            ks.append(ALL)
        else:
            k = int(item)
            if k < 1:
                raise ValueError(f"k must be ≥ 1, got {k}")
            ks.append(k)
    if not ks:
        raise ValueError("no k given")
    return tuple(dict.fromkeys(ks))


def k_label(k: int | None) -> str:
    return "all" if k is None else str(k)


@dataclass(frozen=True)
class Case:
    """One labelled request.

    ``catalog`` is None when the case's tools could not be parsed (the proxy then
    forwards them unchanged). ``requirements``: one tuple per required tool, satisfied
    by any of its members. ``tools``: the request's ``tools`` array as the file gives it
    (inline, or its ``catalog`` file's; shared by the cases of one catalogue), what
    ``toolprune eval --live`` sends.
    """

    id: str
    conversation: str
    messages: list[Any]
    catalog: Catalog | None
    tool_names: tuple[str, ...]
    requirements: tuple[tuple[str, ...], ...]
    tool_choice: Any = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    tools: Any = None

    @property
    def expects_none(self) -> bool:
        return not self.requirements


@dataclass(frozen=True)
class CaseSet:
    """Cases of one data file, in file order. ``total``: cases in the file (before
    sampling); ``conversations``: distinct conversation keys among ``cases``."""

    name: str
    path: Path
    cases: list[Case]
    total: int

    @property
    def conversations(self) -> int:
        return len({case.conversation for case in self.cases})


def conversation_key(raw: Mapping[str, Any]) -> str:
    """The conversation a case is a step of.

    An explicit ``conversation`` / ``conversation_id`` / ``source_id`` key (BFCL
    multi-turn: ``source_id``); else the id without a ``_callN`` suffix (API-Bank:
    ``..._call0``, ``..._call1`` are the steps of one dialogue) or a ``_tN_sM`` suffix;
    else the case id (a single-turn case is its own conversation).
    """
    for key in ("conversation", "conversation_id", "source_id"):
        value = raw.get(key)
        if isinstance(value, str | int) and str(value):
            return str(value)
    case_id = str(raw.get("id", ""))
    for pattern in (_CALL_SUFFIX, _STEP_SUFFIX):
        match = pattern.match(case_id)
        if match:
            return match["conversation"]
    return case_id


def _requirements(raw: Mapping[str, Any]) -> tuple[tuple[str, ...], ...]:
    expected = raw.get("expected") or []
    any_of = raw.get("expected_any_of") or []
    if not isinstance(expected, list) or not isinstance(any_of, list):
        raise ValueError(f"case {raw.get('id')!r}: expected / expected_any_of must be lists")
    units = [(str(name),) for name in dict.fromkeys(expected)]
    for group in any_of:
        members = group if isinstance(group, list) else [group]
        if members:
            units.append(tuple(dict.fromkeys(str(name) for name in members)))
    return tuple(units)


class _CatalogCache:
    """Parsed catalogues by source (a file path, or the canonical JSON of an inline
    ``tools`` array), so each distinct catalogue is parsed once: the catalogue, its
    function names and the array as read."""

    def __init__(self) -> None:
        self._parsed: dict[str, tuple[Catalog | None, tuple[str, ...], Any]] = {}

    def _parse(self, key: str, load: Callable[[], Any]) -> tuple[Catalog | None, tuple[str, ...], Any]:
        hit = self._parsed.get(key)
        if hit is None:
            tools = load()
            try:
                catalog: Catalog | None = parse_tools(tools)
                names = tuple(catalog.names)
            except CatalogError:
                catalog = None
                names = tuple(
                    str(entry.get("function", {}).get("name", ""))
                    for entry in tools
                    if isinstance(entry, Mapping) and isinstance(entry.get("function"), Mapping)
                ) if isinstance(tools, list) else ()
            hit = self._parsed[key] = (catalog, names, tools)
        return hit

    def from_file(self, path: Path) -> tuple[Catalog | None, tuple[str, ...], Any]:
        def load() -> Any:
            with path.open(encoding="utf-8") as handle:
                try:
                    return json.load(handle)
                except RecursionError:
                    raise ValueError(f"{path}: JSON nested too deeply to read") from None

        return self._parse(str(path.resolve()), load)

    def inline(self, tools: Any) -> tuple[Catalog | None, tuple[str, ...], Any]:
        key = json.dumps(tools, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return self._parse(key, lambda: tools)


def _sample(raws: list[dict[str, Any]], limit: int, seed: int) -> list[dict[str, Any]]:
    """Whole conversations, drawn at random (``seed``) until at least ``limit`` cases;
    file order kept. A conversation is never cut, so its state replays faithfully."""
    groups: dict[str, list[int]] = defaultdict(list)
    for position, raw in enumerate(raws):
        groups[conversation_key(raw)].append(position)
    keys = list(groups)
    random.Random(seed).shuffle(keys)
    chosen: list[int] = []
    for key in keys:
        if len(chosen) >= limit:
            break
        chosen.extend(groups[key])
    return [raws[position] for position in sorted(chosen)]


def load_cases(path: Path | str, *, limit: int | None = None, seed: int = 0) -> CaseSet:
    """Read a ``cases.jsonl``. ``limit``: sample whole conversations (seeded) until at
    least ``limit`` cases. Raises ValueError on a malformed case, OSError on I/O."""
    path = Path(path)
    raws: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
            except RecursionError:
                raise ValueError(f"{path}:{number}: JSON nested too deeply to read") from None
            if not isinstance(raw, dict) or not isinstance(raw.get("messages"), list):
                raise ValueError(f"{path}:{number}: a case must be an object with messages")
            if "tools" not in raw and "catalog" not in raw:
                raise ValueError(f"{path}:{number}: a case needs tools or catalog")
            raws.append(raw)
    total = len(raws)
    if limit is not None and limit < total:
        raws = _sample(raws, limit, seed)
    cache = _CatalogCache()
    cases = []
    for raw in raws:
        if "tools" in raw:
            catalog, names, tools = cache.inline(raw["tools"])
        else:
            catalog, names, tools = cache.from_file(path.parent / str(raw["catalog"]))
        meta = {
            key: value
            for key, value in raw.items()
            if key not in ("messages", "tools", "expected", "expected_any_of")
        }
        cases.append(
            Case(
                id=str(raw.get("id", len(cases))),
                conversation=conversation_key(raw),
                messages=raw["messages"],
                catalog=catalog,
                tool_names=names,
                requirements=_requirements(raw),
                tool_choice=raw.get("tool_choice"),
                meta=meta,
                tools=tools,
            )
        )
    name = path.parent.name if path.name == "cases.jsonl" else path.stem
    return CaseSet(name, path, cases, total)
