"""The import graph: the policy package is pure, and no module of the project cycles.

The graph is read from the source (ast), not by importing: every import counts, at
module level, inside functions and under `TYPE_CHECKING` alike, since each is a
dependency a reader has to follow.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "reference"
#: Every installed package of the project.
PROJECT = tuple(ROOT / name for name in ("reference", "memharness", "bench", "loadtests"))

#: What the policy package may import from `reference` besides itself: models, errors
#: and small pure helpers. No store, no engine, no backend.
POLICY_MAY_IMPORT = {
    "reference.clock",
    "reference.dueindex",
    "reference.durations",
    "reference.errors",
    "reference.models",
    "reference.records",
    "reference.suggest",
    "reference.text_interfaces",
    "reference.user_words",
    "reference.validation",
    "reference.yamldoc",
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(packages: Iterable[Path] = (PACKAGE,)) -> dict[str, set[str]]:
    """Module -> the modules of `packages` it imports (a submodule when one is named)."""
    modules = {_module_name(p): p for package in packages for p in package.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in node.names:
                    target = f"{base}.{alias.name}"
                    if target in modules:
                        edges.add(target)
                    elif base in modules:
                        edges.add(base)
        edges.discard(name)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in graph.get(node, ()):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.add(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def package_of(module: str) -> str:
    """`reference.forgetting.engine` -> `reference.forgetting`; a top-level module is its own."""
    parts = module.split(".")
    return ".".join(parts[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for module, edges in graph.items():
        source = package_of(module)
        out.setdefault(source, set()).update(package_of(e) for e in edges)
        out[source].discard(source)
    return out


def _touching_policy(found: Iterable[frozenset[str]]) -> list[frozenset[str]]:
    return [c for c in found if any(m.startswith("reference.policy") for m in c)]


def test_the_graph_sees_a_cycle_when_there_is_one() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == {frozenset({"a", "b", "c"})}
    assert cycles({"a": {"b"}, "b": set()}) == set()


def test_the_graph_reads_imports_of_every_kind() -> None:
    graph = import_graph()
    # Module level, and a submodule named in a from-import.
    assert "reference.policy.rules" in graph["reference.policy.strategy"]
    assert "reference.models" in graph["reference.policy.rules"]


def test_the_policy_package_imports_no_store() -> None:
    graph = import_graph()
    outside = {
        (module, target)
        for module, edges in graph.items()
        if module.startswith("reference.policy")
        for target in edges
        if not target.startswith("reference.policy") and target not in POLICY_MAY_IMPORT
    }
    assert not outside, f"the policy package imports beyond its allowed set: {sorted(outside)}"


def test_no_import_cycle_touches_the_policy_package() -> None:
    graph = import_graph()
    assert _touching_policy(cycles(graph)) == []
    assert _touching_policy(cycles(package_graph(graph))) == []


def test_reference_packages_import_each_other_in_one_direction() -> None:
    assert cycles(package_graph(import_graph())) == set()


def test_no_module_of_the_project_is_in_an_import_cycle() -> None:
    assert cycles(import_graph(PROJECT)) == set()


def _layer_modules() -> list[set[str]]:
    """The modules named in each layer of pyproject.toml's layers contract, top first."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["id"] == "layers"]
    return [
        {name.strip() for name in layer.replace("|", ":").split(":")}
        for layer in contract["layers"]
    ]


def test_every_module_at_the_root_of_memharness_has_a_layer() -> None:
    """The layers contract (checked by `lint-imports` in scripts/test) constrains only the
    modules it names: a new module of memharness must be placed in one layer."""
    named = [module for layer in _layer_modules() for module in layer]
    root = ROOT / "memharness"
    modules = {
        f"memharness.{path.stem}"
        for path in root.iterdir()
        if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").is_file()
    }
    assert sorted(modules - set(named)) == [], "modules of memharness in no layer"
    assert sorted(set(named) - modules - {"reference", "loadtests", "bench"}) == []
    assert len(named) == len(set(named)), "a module named in two layers"
