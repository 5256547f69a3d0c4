"""Imports go one way: no cycle between the package's modules, and no folder importing one above it; and no
module is too long to read.

    python .ci/check_imports.py [PACKAGE_DIR]      (default: pytest_agentreplay beside .ci/)

Every import statement counts, wherever it stands: at module level, inside a function (a lazy import
hides a cycle, it does not remove it) and under ``if TYPE_CHECKING:`` (a cycle for the reader and the
type checker all the same). A module importing its own package's ``__init__`` depends on it like on any
other module.

Three checks, the first two over the graph of module -> module edges:

1. cycles: each strongly connected group of modules is printed with one cycle through it;
2. layers: ``LAYERS`` lists the package's folders (and top-level modules) from the bottom up; a module may
   import its own layer and the layers below, never one above;
3. size: no file of the package is over ``MAX_LINES`` lines (split a longer one by concern).

Exit status 1 and one line per problem when any fails; 0 and a one-line summary otherwise.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

# Bottom first. A name is a top-level module or folder of the package; everything under a folder is in
# the folder's layer. The package's own ``__init__`` (the public facade) may import anything.
# Redaction sits beside core: core names cassette files through it (``core.paths``), and it needs only
# core's constants. The runtime values read the active run (``core.capture``): they sit above core.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"core", "exceptions", "redaction", "plain_import"}),
    frozenset({"guard"}),
    frozenset({"runtime"}),
    frozenset({"http", "frameworks"}),
    frozenset({"cassette"}),
    frozenset({"diff"}),
    frozenset({"replay"}),
    frozenset({"intercept"}),
    frozenset({"report", "interop"}),
    frozenset({"api"}),
    frozenset({"cli"}),
    frozenset({"shell", "hooks", "plugin"}),
)


# A module longer than this holds more than one concern, or will: the check asks for a split.
MAX_LINES = 500


def modules(package: Path) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package ``__init__``)."""
    found: dict[str, tuple[Path, bool]] = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        found[".".join(parts)] = (path, is_package)
    return found


def _targets(name: str, is_package: bool, node: ast.Import | ast.ImportFrom, known: set[str]) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = name.split(".") if is_package else name.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        prefix = ".".join([*base, *([node.module] if node.module else [])])
    else:
        prefix = node.module or ""
    # ``from . import x``: x is a submodule when one of that name exists, else a name in the package.
    return [f"{prefix}.{alias.name}" if f"{prefix}.{alias.name}" in known else prefix for alias in node.names]


def import_graph(package: Path) -> dict[str, set[str]]:
    found = modules(package)
    known = set(found)
    root = package.name
    graph: dict[str, set[str]] = {name: set() for name in found}
    for name, (path, is_package) in found.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for target in _targets(name, is_package, node, known):
                if target != root and not target.startswith(root + "."):
                    continue
                while target not in known and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected group of two or more modules (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(_one_cycle(graph, set(group)))
    return groups


def _one_cycle(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """A shortest way from the group's first module back to itself, inside the group."""
    first = min(group)
    previous: dict[str, str] = {}
    frontier = [first]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & group):
                if child == first:
                    path = [node]
                    while path[-1] != first:
                        path.append(previous[path[-1]])
                    return [first, *reversed(path[:-1]), first]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    return sorted(group)


def layer_of(name: str) -> int | None:
    parts = name.split(".")
    if len(parts) < 2:
        return None  # the facade
    for level, members in enumerate(LAYERS):
        if parts[1] in members:
            return level
    return -1


def layer_problems(graph: dict[str, set[str]]) -> list[str]:
    problems = []
    for name in sorted(graph):
        mine = layer_of(name)
        if mine == -1:
            problems.append(f"{name}: in no layer; add its folder to LAYERS in .ci/check_imports.py")
            continue
        if mine is None:
            continue
        for target in sorted(graph[name]):
            theirs = layer_of(target)
            if theirs is None:
                problems.append(f"{name} imports the package facade {target}: import the module itself")
            elif theirs > mine:
                problems.append(
                    f"{name} (layer {sorted(LAYERS[mine])}) imports {target} "
                    f"(layer {sorted(LAYERS[theirs])}), which sits above it"
                )
    return problems


def size_problems(package: Path) -> list[str]:
    """One line per file of the package over :data:`MAX_LINES` lines, naming it and its length."""
    problems = []
    for path in sorted(package.rglob("*.py")):
        with path.open(encoding="utf-8") as lines:
            count = sum(1 for _ in lines)
        if count > MAX_LINES:
            shown = path.relative_to(package.parent).as_posix()
            problems.append(f"{shown}: {count} lines, over {MAX_LINES}; split it by concern")
    return problems


def main(argv: list[str]) -> int:
    package = Path(argv[0]) if argv else Path(__file__).resolve().parent.parent / "pytest_agentreplay"
    graph = import_graph(package)
    problems = [f"import cycle: {' -> '.join(cycle)}" for cycle in cycles(graph)]
    problems += layer_problems(graph)
    problems += size_problems(package)
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} layout problem(s) in {package}")
        return 1
    edges = sum(len(targets) for targets in graph.values())
    print(
        f"imports go one way: {len(graph)} modules, {edges} edges, no cycle, each layer imports only below; "
        f"no file over {MAX_LINES} lines"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
