"""The harness's import layers: Ray in one module, no import circles, no arrows back into the CLI.

Every import counts, the ones inside functions too: a lazy import hides a circle from Python's
start-up, not from a reader.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted([*ROOT.glob("harness/**/*.py"), *ROOT.glob("methods/**/*.py")]):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(path: Path, known: dict[str, Path]) -> set[str]:
    """Every module ``path`` imports (absolute imports; ``from pkg import mod`` names ``pkg.mod``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in known)
    return found


def _graph() -> dict[str, set[str]]:
    known = _modules()
    return {
        name: {d for d in _imports(path, known) if d in known and d != name} for name, path in known.items()
    }


def _circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_only_harness_tune_imports_ray() -> None:
    known = _modules()
    importers = sorted(
        name
        for name, path in known.items()
        if any(m == "ray" or m.startswith("ray.") for m in _imports(path, known))
    )
    assert importers == ["harness.tune"]


def test_one_spelling_hint_helper() -> None:
    """Every "did you mean" goes through :func:`harness.errors.did_you_mean` (difflib in one module)."""
    known = _modules()
    importers = sorted(name for name, path in known.items() if "difflib" in _imports(path, known))
    assert importers == ["harness.errors"]


def test_no_import_circles() -> None:
    circles = _circles(_graph())
    assert circles == [], sorted(sorted(c) for c in circles)


def test_the_core_does_not_import_the_command_line_layer() -> None:
    back = sorted(
        f"{name} imports {dep}"
        for name, deps in _graph().items()
        if not name.startswith(("harness.commands", "harness.cli"))
        for dep in deps
        if dep.startswith(("harness.commands", "harness.cli"))
    )
    assert back == []


def test_the_checks_see_a_circle_and_a_back_arrow() -> None:
    """The helpers find what they look for (a test that cannot fail is no test)."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [frozenset({"a", "b", "c"})]
    real = _graph()
    assert "harness.store" in real["harness.commands.grid_cmd"]  # lazy imports are seen
    assert "harness.provenance" in real["harness.record"] and "harness.provenance" in real["harness.store"]
