"""Print the import cycles between the project's modules; exit 1 if there is any.

    python scripts/import_cycles.py [PACKAGE ...]

Reads the import graph with grimp (what import-linter uses) over ``evalcore``, ``apps`` and
``evalsite`` (or the packages named), imports inside functions included and ``if TYPE_CHECKING:`` imports left out
(they never run). Each strongly connected group of modules is printed with one cycle through it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

import grimp

PACKAGES = ("evalcore", "apps", "evalsite")


def import_graph(packages: Iterable[str] = PACKAGES) -> dict[str, set[str]]:
    """Module -> the project modules it imports directly."""
    graph = grimp.build_graph(*packages, exclude_type_checking_imports=True)
    return {module: set(graph.find_modules_directly_imported_by(module)) for module in graph.modules}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (``[a, b, ..., a]``) per strongly connected group of two or more modules, or of
    one module importing itself; sorted, each starting from its first module by name."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        # iterative Tarjan: (node, iterator over its successors)
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
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
                if len(group) > 1 or node in edges.get(node, ()):
                    groups.append(sorted(group))
    return sorted(_cycle_through(group, edges) for group in groups)


def _cycle_through(group: list[str], edges: dict[str, set[str]]) -> list[str]:
    """A shortest cycle from the group's first module back to itself, inside the group."""
    members = set(group)
    first = group[0]
    paths = {first: [first]}
    frontier = [first]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(edges.get(node, ())):
                if nxt == first:
                    return [*paths[node], first]
                if nxt in members and nxt not in paths:
                    paths[nxt] = [*paths[node], nxt]
                    following.append(nxt)
        frontier = following
    return [first, first]  # unreachable for a strongly connected group


def main(argv: list[str] | None = None) -> int:
    found = cycles(import_graph(argv or PACKAGES))
    for cycle in found:
        print("cycle: " + " -> ".join(cycle))
    print(f"{len(found)} import cycle(s)" if found else "no import cycles")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
