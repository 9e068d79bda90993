"""The parameter tables of the node pages in docs/ (one page per node), from every node's schema:
``python -m robot_bridge.nodes.parameter_tables`` regenerates them (a test keeps them in step).  The schema
module (robot_bridge.ros.params) knows no node; this one finds them in robot_bridge.node_table."""

from __future__ import annotations

import importlib
from pathlib import Path

from ..node_table import NODES
from ..ros.params import markdown_table, update_tables

PAGES: dict[str, tuple[str, ...]] = {   # page (from the repository's top) -> the tables it carries, in order
    node.docs: tuple(schema.key for schema in node.schemas) for node in NODES}


def node_tables(node) -> dict[str, str]:
    """Table key -> table, for the schemas of one :class:`robot_bridge.node_table.NodeEntry` (imports its
    module)."""
    module = importlib.import_module(node.module)
    return {s.key: markdown_table(getattr(module, s.attribute), s.prefix) for s in node.schemas}


def tables() -> dict[str, str]:
    """Table key (``<!-- parameters: KEY -->``) -> the table of that schema, for every node."""
    return {key: table for node in NODES for key, table in node_tables(node).items()}


def update_page(text: str) -> str:
    """``text`` (any page) with each of its parameter tables generated afresh."""
    return update_tables(text, tables())


def update_pages(root: Path, pages=None) -> list[Path]:
    """Rewrite the tables of ``pages`` (default: every page of :data:`PAGES`) under ``root``; the pages
    that changed."""
    changed = []
    for page in pages or [root / name for name in PAGES]:
        text = Path(page).read_text(encoding="utf-8")
        new = update_page(text)
        if new != text:
            Path(page).write_text(new, encoding="utf-8")
            changed.append(Path(page))
    return changed


if __name__ == "__main__":      # python -m robot_bridge.nodes.parameter_tables [page.md ...]
    import sys

    for path in update_pages(Path.cwd(), sys.argv[1:]):
        print(f"updated {path}")
