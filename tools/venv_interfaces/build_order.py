"""Print the interface packages of a folder in build order, one per line: `name dep dep ...` (the local
packages it depends on, transitively), dependencies first.  Used by tools/setup_venv.sh.

    build_order.py FOLDER [NAME ...]     only the named packages and their local dependencies
"""

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

DEPEND_TAGS = ("depend", "build_depend", "buildtool_depend")


def local_packages(root: Path) -> dict[str, set[str]]:
    found = {p.parent.name: p for p in root.glob("*/package.xml") if (p.parent / "CMakeLists.txt").is_file()}
    return {name: {e.text.strip() for tag in DEPEND_TAGS for e in ET.parse(xml).getroot().iter(tag)
                   if e.text and e.text.strip() in found}
            for name, xml in found.items()}


def build_order(direct: dict[str, set[str]]) -> list[tuple[str, list[str]]]:
    order: list[str] = []
    closure: dict[str, set[str]] = {}

    def visit(name: str, stack: tuple[str, ...]) -> set[str]:
        if name in stack:
            sys.exit(f"build_order: dependency cycle {' -> '.join(stack + (name,))}")
        if name not in closure:
            deps: set[str] = set()
            for dep in sorted(direct[name]):
                deps |= {dep} | visit(dep, stack + (name,))
            closure[name] = deps
            order.append(name)
        return closure[name]

    for name in sorted(direct):
        visit(name, ())
    return [(name, sorted(closure[name])) for name in order]


def selected(order: list[tuple[str, list[str]]], names: list[str]) -> list[tuple[str, list[str]]]:
    """The entries of ``order`` that ``names`` need (each named package and its dependencies), in order."""
    known = {name for name, _ in order}
    unknown = sorted(set(names) - known)
    if unknown:
        sys.exit(f"build_order: no interface package {', '.join(unknown)} "
                 f"(known: {', '.join(sorted(known))})")
    wanted = set(names).union(*(deps for name, deps in order if name in names))
    return [(name, deps) for name, deps in order if name in wanted]


if __name__ == "__main__":
    order = build_order(local_packages(Path(sys.argv[1])))
    if len(sys.argv) > 2:
        order = selected(order, sys.argv[2:])
    for name, deps in order:
        print(" ".join([name, *deps]))
