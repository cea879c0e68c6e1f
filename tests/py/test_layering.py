"""The architecture's import rules, checked on the source of every module of the `kiln`
package (python/kiln, and lowering/ and dialects/, shipped as kiln.lowering and kiln.dialects).

Every `import` counts, at any depth (a function-level import is still a dependency), and every
one that names a Kiln module must:

- name a module that exists;
- point down the layers below, or stay inside its own package: a module may import from its
  own component and from components of lower layers, never from a higher layer nor from a
  sibling component of its own layer;
- never close a circle of imports between modules.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Where each top-level package's sources live (pyproject.toml's wheel.packages).
SOURCES = {"kiln": ROOT / "python" / "kiln", "kiln.lowering": ROOT / "lowering",
           "kiln.dialects": ROOT / "dialects"}

# THE RULE: Kiln's layers, bottom to top. A component is a module or a package (with all its
# submodules); "kiln" is the package's own __init__.py, the public API, alone. Components of
# one layer are independent of each other.
LAYERS: list[tuple[str, list[str]]] = [
    ("errors", ["kiln.errors"]),
    # The one table of KILN_* settings every layer reads (and the docs list).
    ("settings", ["kiln.environment"]),
    ("utilities", ["kiln.diagnostics", "kiln.native", "kiln.layout", "kiln.version",
                   "kiln.mlir_loading"]),
    # Several devices: shardings and groups as data, the fabric and collectives at run time.
    ("devices", ["kiln.distributed"]),
    ("dialects (check, kiln, sdy)", ["kiln.dialects"]),
    ("the MLIR context", ["kiln.context"]),
    # How compiled code and numpy meet: memref descriptors, dtypes, custom calls, check
    # outcomes. Nothing that compiles.
    ("runtime ABI", ["kiln.runtime"]),
    ("pass infrastructure", ["kiln.pipeline", "kiln.dumping"]),
    ("passes", ["kiln.lowering"]),
    # Front ends make modules (plus their calling convention), targets lower and load them,
    # the reference interpreter evaluates them: none of them knows the others.
    ("front ends, targets, reference interpreter",
     ["kiln.frontend", "kiln.targets", "kiln.reference"]),
    # Imports through a front end, compiles with a target, calls with the calling convention.
    ("driver", ["kiln.driver"]),
    ("kiln.jit", ["kiln.jit"]),
    ("public API", ["kiln"]),
    # JAX's PJRT plugin: JAX programs compiled and run through the public API.
    ("PJRT plugin", ["kiln.pjrt"]),
    # interpreter.run_parallel: several programs compiled through the public API, run together
    ("several programs", ["kiln.parallel_programs"]),
    ("tools", ["kiln.conformance", "kiln.bench"]),
    ("command line", ["kiln.cli"]),
    # The reference pages, generated from everything below (the CLI's parsers included).
    ("documentation", ["kiln.docs_reference"]),
]


@dataclass(frozen=True)
class Import:
    source: str   # importing module
    target: str   # imported Kiln module
    line: int

    def __str__(self) -> str:
        return f"{self.source} imports {self.target} (line {self.line})"


def kiln_modules() -> dict[str, Path]:
    modules = {}
    for package, root in SOURCES.items():
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join([package, *parts])
            if package == "kiln" and parts and f"kiln.{parts[0]}" in SOURCES:
                continue  # shipped from its own directory
            modules[name] = path
    return modules


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    """Every Kiln module `name` imports: `import kiln.x`, `from kiln.x import y` and relative
    imports, at any depth; `from pkg import sub` counts as importing the submodule."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [Import(name, a.name, node.lineno) for a in node.names
                      if a.name == "kiln" or a.name.startswith("kiln.")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module != "kiln" and not module.startswith("kiln."):
                continue
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                found.append(Import(name, sub if sub in modules else module, node.lineno))
    return found


def import_graph() -> tuple[dict[str, Path], list[Import]]:
    modules = kiln_modules()
    edges = [i for name, path in modules.items() for i in imports_of(name, path, modules)]
    return modules, edges


def component(module: str) -> str | None:
    """The listed component `module` belongs to: the longest listed prefix."""
    names = [c for _, comps in LAYERS for c in comps]
    matches = [c for c in names if module == c or (c != "kiln" and module.startswith(c + "."))]
    return max(matches, key=len) if matches else None


def layer(comp: str) -> int:
    return next(i for i, (_, comps) in enumerate(LAYERS) if comp in comps)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle per strongly connected component with one (Tarjan), as a path a -> ... -> a."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:  # recursion depth is bounded by the module count
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
            scc = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1 or v in graph.get(v, ()):
                components.append(sorted(scc))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_circle(graph, scc) for scc in components]


def _circle(graph: dict[str, set[str]], scc: list[str]) -> list[str]:
    """A shortest path from scc[0] back to itself inside the component (breadth first)."""
    start, members = scc[0], set(scc)
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(graph.get(v, ())):
                if w not in members:
                    continue
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [start, *reversed(path[:-1]), start] if v != start else [start, start]
                if w not in parents:
                    parents[w] = v
                    following.append(w)
        frontier = following
    raise AssertionError(f"no circle through {start} in {scc}")


# -- the rules -----------------------------------------------------------------------------------
def test_every_module_has_a_layer():
    modules, _ = import_graph()
    unplaced = sorted(m for m in modules if component(m) is None)
    assert not unplaced, "modules outside the architecture (add them to LAYERS): " + ", ".join(unplaced)


def test_every_layer_component_exists():
    modules, _ = import_graph()
    listed = [c for _, comps in LAYERS for c in comps]
    missing = [c for c in listed if not any(component(m) == c for m in modules)]
    assert not missing, f"LAYERS names components with no module: {missing}"


def test_kiln_imports_name_existing_modules():
    modules, edges = import_graph()
    dangling = [str(i) for i in edges if i.target not in modules]
    assert not dangling, "imports of modules that do not exist:\n  " + "\n  ".join(dangling)


def test_imports_point_down_the_layers():
    modules, edges = import_graph()
    wrong = []
    for i in edges:
        src, dst = component(i.source), component(i.target)
        if i.target not in modules or src is None or dst is None or src == dst:
            continue  # reported by the tests above; inside a component anything goes
        if layer(dst) >= layer(src):
            how = "a sibling" if layer(dst) == layer(src) else "a higher layer"
            wrong.append(f"{i}: {LAYERS[layer(src)][0]} -> {LAYERS[layer(dst)][0]} is {how}")
    assert not wrong, "imports against the layer order:\n  " + "\n  ".join(wrong)


def test_runtime_is_the_abi_only():
    """Said on its own because it is the rule most easily broken: the runtime ABI never
    reaches up into anything that compiles."""
    _, edges = import_graph()
    upward = [str(i) for i in edges if component(i.source) == "kiln.runtime"
              and component(i.target) in ("kiln.lowering", "kiln.pipeline", "kiln.targets",
                                          "kiln.frontend", "kiln.driver", "kiln")]
    assert not upward, "\n".join(upward)


def test_no_import_circles():
    modules, edges = import_graph()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for i in edges:
        if i.target in modules:
            graph[i.source].add(i.target)
    found = cycles(graph)
    assert not found, "import circles:\n  " + "\n  ".join(" -> ".join(c) for c in found)


# -- the checker itself ----------------------------------------------------------------------------
def test_function_level_and_relative_imports_are_seen():
    modules, edges = import_graph()
    pairs = {(i.source, i.target) for i in edges}
    assert ("kiln.cli.main", "kiln.conformance") in pairs        # inside a function
    assert ("kiln.frontend", "kiln.frontend.mlir") in pairs      # `from . import mlir`
    assert ("kiln.driver.executable", "kiln.runtime.checks") in pairs
    assert "kiln.lowering.ir_util" in modules and "kiln.driver" in modules


def test_circles_are_reported_as_paths():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert sorted(cycles(graph)) == [["a", "b", "c", "a"], ["e", "e"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
