"""The parameter tables of the node pages in docs/ (one page per node), from every node's schema:
``python -m robot_bridge.nodes.parameter_tables`` regenerates them (a test keeps them in step).  The schema
module (robot_bridge.ros.params) knows no node; this one imports them."""

from __future__ import annotations

from pathlib import Path

from ..ros.params import markdown_table, update_tables

PAGES: dict[str, tuple[str, ...]] = {   # page (from the repository's top) -> the tables it carries, in order
    "docs/description_node.md": ("description_node",),
    "docs/sensor_bridge_node.md": ("sensor_bridge", "sensor_bridge.sensors"),
    "docs/controller_node.md": ("controller_node",),
    "docs/world_node.md": ("world_node",),
}


def tables() -> dict[str, str]:
    """Table key (``<!-- parameters: KEY -->``) -> the table of that schema."""
    from . import controller, description, sensor_bridge, world

    return {"description_node": markdown_table(description.PARAMETERS),
            "world_node": markdown_table(world.PARAMETERS),
            "sensor_bridge": markdown_table(sensor_bridge.PARAMETERS),
            "sensor_bridge.sensors": markdown_table(sensor_bridge.SENSOR_PARAMETERS, "sensors.<name>."),
            "controller_node": markdown_table(controller.PARAMETERS)}


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
