"""The package map of ARCHITECTURE.md, checked on the source tree (``ast``, nothing imported):
which package may import which (the turn core never imports an API package, and no API
package imports another), what the proxy may import of selection (its four public
modules), which folder of selection may import which (no cycle between them), no import
cycle between modules, no module of ``proxy/``, ``selection/``, ``config/`` or
``benchmarks/`` over 400 lines, at most 8 modules at selection's top level and 15 in any
folder of ``proxy/`` or ``selection/``, and no function of ``selection/`` or
``proxy/turn/`` over 80."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("config", "proxy", "selection")
MAX_LINES = 400
#: Most lines of a function (its ``def`` to its last line, docstring included).
MAX_FUNCTION_LINES = 80
#: Where functions are held to :data:`MAX_FUNCTION_LINES`.
SHORT_FUNCTIONS = ("selection", "proxy/turn")
#: All of selection that ``proxy`` may import: the front door, the shared types (the
#: errors among them), learning from traffic, the offline evaluation.
SELECTION_PUBLIC = {
    "selection.planning", "selection.types", "selection.learning", "selection.evaluation",
}
#: Modules allowed over MAX_LINES, each with the reason.
SIZE_EXEMPT = {
}

#: The API packages: each an adapter of the turn core, none importing another.
API_PACKAGES = ("proxy.apis.chat", "proxy.apis.messages", "proxy.apis.responses")
#: What an API package may import besides itself.
_API_IMPORTS = {"proxy.turn", "proxy.http", "proxy.log", "proxy.metrics", "config", "selection"}
#: Which first-party packages a module of each package may import (its own always allowed;
#: a key allows the packages under it too: ``proxy.apis`` allows ``proxy.apis.chat``).
#: The most specific key that prefixes a module's name applies.
ALLOWED: dict[str, set[str]] = {
    "selection": set(),
    "config": {"selection"},
    "proxy.log": set(),
    "proxy.metrics": set(),
    "proxy.http": {"proxy.log", "proxy.metrics", "config"},
    "proxy.servers": {"proxy.http", "proxy.log", "config", "selection"},
    "proxy.turn": {
        "proxy.http", "proxy.servers", "proxy.log", "proxy.metrics", "proxy.state", "config",
        "selection",
    },
    "proxy.state": {"selection"},
    "proxy.apis": set(),  # the package's docstring
    **dict.fromkeys(API_PACKAGES, _API_IMPORTS),
    "proxy.usage": {"proxy.turn", "proxy.state", "proxy.log", "selection"},
    "proxy.components": {"proxy.state", "proxy.log", "config", "selection"},
    "proxy.app": {
        "proxy.http", "proxy.servers", "proxy.turn", "proxy.apis", "proxy.usage", "proxy.components", "proxy.log",
        "proxy.metrics", "proxy.state", "config", "selection",
    },
    "proxy.cli": {
        "proxy.app", "proxy.turn", "proxy.apis", "proxy.usage", "proxy.components", "proxy.metrics",
        "proxy.log", "proxy.state", "config", "selection",
    },
}
#: Inside selection: what each folder (and each module at its top level) may import of
#: selection besides itself and :mod:`selection.errors`, which every part may import. The
#: folders' ``__init__`` docstrings say the same. Ordered from the bottom floor up.
SELECTION_PARTS: dict[str, set[str]] = {
    "selection.errors": set(),
    "selection.conversation": set(),
    "selection.embedders": set(),
    "selection.catalog": {"selection.conversation"},
    "selection.learning": {"selection.catalog"},
    "selection.indexes": {"selection.catalog", "selection.embedders"},
    "selection.ranking": {
        "selection.catalog", "selection.embedders", "selection.indexes", "selection.learning",
    },
    "selection.choosing": {
        "selection.catalog", "selection.indexes", "selection.learning", "selection.ranking",
    },
    "selection.clients": {
        "selection.catalog", "selection.choosing", "selection.conversation",
        "selection.indexes", "selection.ranking",
    },
    "selection.evaluation": {
        "selection.catalog", "selection.choosing", "selection.clients",
        "selection.conversation", "selection.indexes", "selection.ranking",
    },
    # The front door and its types, on top.
    "selection.plan": {
        "selection.catalog", "selection.choosing", "selection.clients",
        "selection.conversation", "selection.ranking",
    },
    "selection.planning_costs": {
        "selection.plan", "selection.catalog", "selection.choosing", "selection.clients",
    },
    "selection.history_facts": {"selection.catalog", "selection.conversation"},
    "selection.delivery": {
        "selection.plan", "selection.choosing", "selection.clients", "selection.conversation",
        "selection.history_facts",
    },
    "selection.planning": {
        "selection.plan", "selection.planning_costs", "selection.delivery",
        "selection.history_facts", "selection.catalog",
        "selection.choosing",
        "selection.clients", "selection.conversation", "selection.embedders",
        "selection.indexes", "selection.ranking",
    },
    "selection.types": {
        "selection.plan", "selection.catalog", "selection.choosing", "selection.clients",
        "selection.conversation", "selection.embedders",
    },
}
#: Most modules at selection's top level (``__init__`` included), and in any one folder of
#: ``proxy/`` or ``selection/``.
MAX_TOP_MODULES = 8
MAX_FOLDER_MODULES = 15
#: The package that owns each rule key (``proxy.turn.turn`` belongs to ``proxy.turn``).
OWNERS = sorted(ALLOWED, key=len, reverse=True)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def product_modules() -> dict[str, Path]:
    return {
        module_name(path): path
        for package in PRODUCT
        for path in sorted((ROOT / package).rglob("*.py"))
    }


MODULES = product_modules()


def imports_of(name: str, path: Path) -> set[str]:
    """First-party modules ``name`` imports, anywhere in the file (``TYPE_CHECKING``
    blocks and function bodies included). ``from package import module`` counts as an
    import of the module."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


GRAPH = {name: imports_of(name, path) for name, path in MODULES.items()}


def owner(module: str) -> str:
    for key in OWNERS:
        if module == key or module.startswith(key + "."):
            return key
    return module


def test_every_product_module_is_covered_by_a_rule():
    unowned = sorted(m for m in MODULES if owner(m) not in ALLOWED and m not in PRODUCT)
    assert unowned == [], f"add these modules' packages to ALLOWED: {unowned}"


def within(module: str, packages: set[str]) -> bool:
    """Whether ``module`` is one of ``packages`` or under one of them."""
    return any(module == package or module.startswith(package + ".") for package in packages)


def test_packages_import_only_what_the_package_map_allows():
    broken = []
    for module, targets in sorted(GRAPH.items()):
        if module in PRODUCT or module == "proxy":  # package docstrings only
            continue
        mine = owner(module)
        allowed = ALLOWED[mine] | {mine}
        for target in sorted(targets):
            if not within(target, allowed):
                broken.append(f"{module} imports {target}")
    assert broken == []


def test_the_proxy_imports_only_the_public_modules_of_selection():
    reached = {
        target for module, targets in GRAPH.items() if within(module, {"proxy"})
        for target in targets if within(target, {"selection"})
    }
    assert reached <= SELECTION_PUBLIC, sorted(reached - SELECTION_PUBLIC)
    assert len(SELECTION_PUBLIC) <= 4


def long_functions(source: str, label: str) -> dict[str, int]:
    """The functions (and methods) of ``source`` over :data:`MAX_FUNCTION_LINES` lines, as
    ``"{label}:{line} {name}"`` → lines."""
    found = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = node.end_lineno - node.lineno + 1  # type: ignore[operator]
            if lines > MAX_FUNCTION_LINES:
                found[f"{label}:{node.lineno} {node.name}"] = lines
    return found


@pytest.mark.parametrize("folder", SHORT_FUNCTIONS)
def test_no_function_over_the_length_limit(folder):
    long = {}
    for path in sorted((ROOT / folder).rglob("*.py")):
        long.update(long_functions(path.read_text(), str(path.relative_to(ROOT))))
    assert long == {}


def test_the_length_check_sees_a_long_function():
    """The check above fails on a function that breaks it (it is not vacuous)."""
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    assert long_functions(f"def long():\n{body}", "x") == {"x:1 long": MAX_FUNCTION_LINES + 1}
    assert long_functions(f"def short():\n{body[: body.rindex('    x')]}", "x") == {}


def test_no_api_package_imports_another_and_the_core_imports_none():
    crossing = [
        f"{module} imports {target}"
        for module, targets in sorted(GRAPH.items())
        for target in sorted(targets)
        if within(target, set(API_PACKAGES))
        and (within(module, {"proxy.turn"}) or within(module, set(API_PACKAGES) - {owner(target)}))
    ]
    assert crossing == []


def test_product_never_imports_tests_benchmarks_or_deploy():
    outside = ("tests", "benchmarks", "deploy")
    found = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names] if isinstance(node, ast.Import)
                else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            )
            found += [f"{name} imports {n}" for n in names if n.split(".")[0] in outside]
    assert found == []


def test_no_import_cycle_between_modules():
    sorter = graphlib.TopologicalSorter(GRAPH)
    try:
        sorter.prepare()
    except graphlib.CycleError as error:
        pytest.fail(f"import cycle: {' -> '.join(error.args[1])}")


@pytest.mark.parametrize("package", ["proxy", "selection", "config", "benchmarks"])
def test_no_module_over_the_size_limit(package):
    long = {
        str(path.relative_to(ROOT)): count
        for path in sorted((ROOT / package).rglob("*.py"))
        if (count := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert {p: n for p, n in long.items() if p not in SIZE_EXEMPT} == {}


def test_size_exemptions_are_still_needed():
    for relative in SIZE_EXEMPT:
        path = ROOT / relative
        assert path.is_file(), f"{relative} is gone: drop its exemption"
        assert len(path.read_text().splitlines()) > MAX_LINES, f"{relative} fits: drop its exemption"


def test_the_checker_sees_a_cycle_and_a_forbidden_import():
    """The two checks above fail on a graph that breaks them (they are not vacuous)."""
    cyclic = {**GRAPH, "proxy.turn.rounds": GRAPH["proxy.turn.rounds"] | {"proxy.turn.handler"}}
    with pytest.raises(graphlib.CycleError):
        graphlib.TopologicalSorter(cyclic).prepare()
    assert "proxy.turn.turn" in GRAPH["proxy.usage.writer"]
    assert owner("proxy.http.upstream") == "proxy.http"
    assert owner("proxy.apis.chat.view") == "proxy.apis.chat"
    assert not within("proxy.turn.rounds", ALLOWED["proxy.http"])
    assert not within("proxy.apis.messages.search", ALLOWED["proxy.apis.responses"])
    assert within("proxy.apis.messages.search", ALLOWED["proxy.app"])
    assert "proxy.turn.rounds" in GRAPH["proxy.turn.handler"]
    assert "proxy.turn.adapter" in GRAPH["proxy.apis.chat.adapter"]


def selection_part(module: str) -> str | None:
    """The entry of :data:`SELECTION_PARTS` a selection module belongs to (None: the
    package's own ``__init__``)."""
    parts = module.split(".")
    return None if len(parts) < 2 else ".".join(parts[:2])


def selection_part_graph() -> dict[str, set[str]]:
    """Which part of selection imports which (:data:`SELECTION_PARTS`' keys)."""
    graph: dict[str, set[str]] = {}
    for module, targets in GRAPH.items():
        mine = selection_part(module) if within(module, {"selection"}) else None
        if mine is None:
            continue
        graph.setdefault(mine, set())
        for target in targets:
            theirs = selection_part(target) if within(target, {"selection"}) else None
            if theirs is not None and theirs != mine:
                graph[mine].add(theirs)
    return graph


def test_every_part_of_selection_has_a_rule():
    assert sorted(set(selection_part_graph()) - set(SELECTION_PARTS)) == []


def test_selection_folders_import_only_what_their_rule_allows():
    broken = [
        f"{part} imports {target}"
        for part, targets in sorted(selection_part_graph().items())
        for target in sorted(targets)
        if target not in SELECTION_PARTS.get(part, set()) | {"selection.errors"}
    ]
    assert broken == []


def test_no_import_cycle_between_the_folders_of_selection():
    try:
        graphlib.TopologicalSorter(selection_part_graph()).prepare()
    except graphlib.CycleError as error:
        pytest.fail(f"cycle between folders: {' -> '.join(error.args[1])}")
    with pytest.raises(graphlib.CycleError):  # the check is not vacuous
        graphlib.TopologicalSorter({**SELECTION_PARTS, "selection.catalog": {
            "selection.ranking"}}).prepare()


def folder_sizes(package: str) -> dict[str, int]:
    """Modules (``.py`` files, ``__init__`` included) directly in each folder of ``package``."""
    return {
        str(folder.relative_to(ROOT)): len(list(folder.glob("*.py")))
        for folder in [ROOT / package, *sorted((ROOT / package).rglob("*/"))]
        if folder.is_dir() and folder.name != "__pycache__"
    }


def test_selection_has_few_modules_at_its_top():
    assert folder_sizes("selection")["selection"] <= MAX_TOP_MODULES


@pytest.mark.parametrize("package", ["proxy", "selection"])
def test_no_folder_holds_more_than_its_share_of_modules(package):
    crowded = {f: n for f, n in folder_sizes(package).items() if n > MAX_FOLDER_MODULES}
    assert crowded == {}
