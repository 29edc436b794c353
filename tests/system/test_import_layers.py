"""The architecture as import rules: which package may import which, Ray in one package, no circles.

Every import counts, the ones inside functions and under ``TYPE_CHECKING`` too: a lazy import hides
a circle from Python's start-up, not from a reader. docs/architecture.md draws the same layers.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers import REPO_ROOT

LAYERS: tuple[tuple[str, ...], ...] = (
    ("harness.errors", "harness.coerce", "harness.atomic", "harness.removal", "harness.parent_death"),
    ("harness.config",),
    ("harness.encoder",),
    ("methods",),
    ("harness.postprocess",),
    ("harness.evaluation",),
    ("harness.store",),
    ("harness.specs",),
    ("harness.stats",),
    ("harness.run",),
    ("harness.jobs",),
    ("harness.grid",),
    ("harness.reporting",),
    ("harness.commands", "harness.results"),
    ("harness.cli",),
)
"""From the bottom up: a module may import its own layer and the layers below it, never one above.
The foundation (errors, coercion of typed values, atomic writes, guarded removals, helpers that
end with their parent) serves everyone; the settings and the encoder know no method; methods know
the encoder's call and nothing of the loop; post-processing (BERT-flow, BERT-whitening) stands
apart from the methods; the harness's packages follow the life of a run and a grid up to the command
line and the Python API (``harness.results``), which stand side by side at the top."""

NEVER: tuple[tuple[str, str], ...] = (
    ("harness.reporting", "harness.grid"),
    ("harness.config", "methods"),
    ("harness.encoder", "methods"),
)
"""Imports ruled out whatever the layers say: the reporters read records and specs, not the grid
that made them; the settings and the encoder are the same whichever methods exist."""

RAY_PACKAGE = "harness.grid.tune"
"""The only package that imports ``ray``."""
RAY_USERS = {"harness.grid.launch", "harness.grid.preflight.cluster"}
"""The only modules outside it that import it: the grid's launch and the cluster check."""


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted([*REPO_ROOT.glob("harness/**/*.py"), *REPO_ROOT.glob("methods/**/*.py")]):
        parts = path.relative_to(REPO_ROOT).with_suffix("").parts
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


def layer_of(module: str) -> int | None:
    """The index in :data:`LAYERS` of the longest prefix that names ``module``'s package."""
    best: tuple[int, int] | None = None
    for index, packages in enumerate(LAYERS):
        for package in packages:
            if (module == package or module.startswith(package + ".")) and (
                best is None or len(package) > best[1]
            ):
                best = (index, len(package))
    return None if best is None else best[0]


def back_arrows(graph: dict[str, set[str]]) -> list[str]:
    """``a imports b`` for every import from a lower layer into a higher one."""
    found = []
    for name, deps in sorted(graph.items()):
        here = layer_of(name)
        for dep in sorted(deps):
            there = layer_of(dep)
            if here is not None and there is not None and there > here:
                found.append(f"{name} imports {dep}")
    return found


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
        for w in sorted(graph.get(v, ())):
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


def test_every_module_has_a_layer() -> None:
    unplaced = sorted(name for name in _modules() if name != "harness" and layer_of(name) is None)
    assert unplaced == [], "add them to LAYERS (and to docs/architecture.md)"


def test_no_import_runs_from_a_lower_layer_into_a_higher_one() -> None:
    assert back_arrows(_graph()) == []


def forbidden_arrows(graph: dict[str, set[str]]) -> list[str]:
    """``a imports b`` for every pair of :data:`NEVER`."""
    inside = lambda module, package: module == package or module.startswith(package + ".")  # noqa: E731
    return [
        f"{name} imports {dep}"
        for name, deps in sorted(graph.items())
        for dep in sorted(deps)
        if any(inside(name, a) and inside(dep, b) for a, b in NEVER)
    ]


def test_no_import_that_is_ruled_out() -> None:
    assert forbidden_arrows(_graph()) == []


def test_ray_is_imported_by_one_package_and_reached_from_two_modules() -> None:
    known = _modules()
    importers = sorted(
        name
        for name, path in known.items()
        if any(m == "ray" or m.startswith("ray.") for m in _imports(path, known))
    )
    assert importers and all(name.startswith(RAY_PACKAGE) for name in importers), importers
    users = {
        name
        for name, deps in _graph().items()
        if not name.startswith(RAY_PACKAGE) and any(d.startswith(RAY_PACKAGE) for d in deps)
    }
    assert users == RAY_USERS


def test_one_spelling_hint_helper() -> None:
    """Every "did you mean" goes through :func:`harness.errors.did_you_mean` (difflib in one module)."""
    known = _modules()
    importers = sorted(name for name, path in known.items() if "difflib" in _imports(path, known))
    assert importers == ["harness.errors"]


def test_no_import_circles() -> None:
    circles = _circles(_graph())
    assert circles == [], sorted(sorted(c) for c in circles)


def test_the_checks_see_a_circle_a_back_arrow_and_a_second_ray_importer() -> None:
    """The helpers find what they look for (a test that cannot fail is no test)."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [frozenset({"a", "b", "c"})]
    assert back_arrows({"harness.store.record": {"harness.grid.plan.status"}}) == [
        "harness.store.record imports harness.grid.plan.status"
    ]
    assert back_arrows({"methods.dclr": {"harness.run.step", "harness.encoder.calls"}}) == [
        "methods.dclr imports harness.run.step"
    ]
    assert back_arrows({"harness.grid.plan.status": {"harness.store.record", "methods"}}) == []
    assert forbidden_arrows(
        {"harness.reporting.claims": {"harness.grid.plan.status", "harness.specs.cells"}}
    ) == ["harness.reporting.claims imports harness.grid.plan.status"]
    assert forbidden_arrows(
        {"harness.encoder.model": {"methods.base"}, "methods.base": {"harness.encoder"}}
    ) == ["harness.encoder.model imports methods.base"]
    assert not "harness.reporting.tables".startswith(RAY_PACKAGE)
    real = _graph()
    assert "harness.grid.tune.driver" in real["harness.grid.launch"]  # lazy imports are seen
    assert "harness.store.provenance" in real["harness.store.record"]
    assert layer_of("harness.grid.tune.driver") == layer_of("harness.grid") != layer_of("harness.run")
