"""The parameter tables of docs/nodes.md, from every node's schema: ``python -m
robot_bridge.nodes.parameter_tables docs/nodes.md`` regenerates them (a test keeps them in step).  The
schema module (robot_bridge.ros.params) knows no node; this one imports them."""

from __future__ import annotations

from ..ros.params import markdown_table, update_tables


def readme_tables() -> dict[str, str]:
    """docs/nodes.md section key -> the table of that schema."""
    from . import controller, description, sensor_bridge, world

    return {"description_node": markdown_table(description.PARAMETERS),
            "world_node": markdown_table(world.PARAMETERS),
            "sensor_bridge": markdown_table(sensor_bridge.PARAMETERS),
            "sensor_bridge.sensors": markdown_table(sensor_bridge.SENSOR_PARAMETERS, "sensors.<name>."),
            "controller_node": markdown_table(controller.PARAMETERS)}


def update_readme(text: str) -> str:
    return update_tables(text, readme_tables())


if __name__ == "__main__":      # python -m robot_bridge.nodes.parameter_tables [docs/nodes.md]
    import sys
    from pathlib import Path

    readme = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/nodes.md")
    readme.write_text(update_readme(readme.read_text()))
