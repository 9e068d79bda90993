"""Make a venv a ROS 2 prefix for robot_bridge, as `colcon build` + `source install/setup.bash` would.

Called by tools/setup_venv.sh after the editable install (which installs no data_files and puts the console
scripts in bin/).  Creates, relative symlinks only, so an edited launch file or config is what runs:

    share/ament_index/resource_index/packages/robot_bridge -> resource/robot_bridge
    share/robot_bridge/package.xml                          -> package.xml
    share/robot_bridge/launch/<file>, config/<file>         -> launch/*.py, config/*  (files, not the
                                                               folders: ros2launch's os.walk does not follow
                                                               folder links)
    lib/robot_bridge/<executable>                           -> bin/<executable>, every console script

and makes `source VENV/bin/activate` put the venv on AMENT_PREFIX_PATH (`deactivate` restores it).
Stale links (a removed launch file, config or executable) are removed.  Safe to re-run.

Usage: VENV/bin/python tools/venv_ros_prefix.py VENV
"""

from __future__ import annotations

import os
import sys
from glob import glob
from importlib import metadata
from pathlib import Path

PACKAGE = "robot_bridge"
REPO = Path(__file__).resolve().parents[1]
ACTIVATE_BEGIN = "# >>> robot_bridge: this venv is a ROS 2 prefix (tools/venv_ros_prefix.py) >>>"
ACTIVATE_END = "# <<< robot_bridge <<<"
# Appended to bin/activate (bash/zsh).  Sourcing it twice keeps the first saved value and one venv entry.
ACTIVATE_BLOCK = f"""{ACTIVATE_BEGIN}
if [ -z "${{_RB_OLD_AMENT_PREFIX_PATH+x}}" ]; then
    _RB_OLD_AMENT_PREFIX_PATH="${{AMENT_PREFIX_PATH-__unset__}}"
fi
case ":${{AMENT_PREFIX_PATH-}}:" in
    *":$VIRTUAL_ENV:"*) ;;
    *) export AMENT_PREFIX_PATH="$VIRTUAL_ENV${{AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}}" ;;
esac
eval "_rb_venv_$(declare -f deactivate)"
deactivate () {{
    if [ "${{_RB_OLD_AMENT_PREFIX_PATH-}}" = __unset__ ]; then unset AMENT_PREFIX_PATH
    elif [ -n "${{_RB_OLD_AMENT_PREFIX_PATH+x}}" ]; then
        export AMENT_PREFIX_PATH="$_RB_OLD_AMENT_PREFIX_PATH"
    fi
    unset _RB_OLD_AMENT_PREFIX_PATH
    _rb_venv_deactivate "$@"
    if [ "${{1-}}" != nondestructive ]; then unset -f _rb_venv_deactivate; fi
}}
{ACTIVATE_END}
"""


def wanted_links(venv: Path) -> dict[Path, Path]:
    """link path -> target, mirroring setup.py's data_files and setup.cfg's script dir."""
    share = venv / "share" / PACKAGE
    links = {venv / "share/ament_index/resource_index/packages" / PACKAGE: REPO / "resource" / PACKAGE,
             share / "package.xml": REPO / "package.xml"}
    for folder, pattern in (("launch", "*.py"), ("config", "*")):
        for source in sorted(glob(str(REPO / folder / pattern))):
            if os.path.isfile(source):
                links[share / folder / Path(source).name] = Path(source)
    scripts = [ep.name for ep in metadata.distribution(PACKAGE).entry_points if ep.group == "console_scripts"]
    for name in scripts:
        target = venv / "bin" / name
        if not target.is_file():
            raise SystemExit(f"venv_ros_prefix: {target} missing (is {PACKAGE} installed in {venv}?)")
        links[venv / "lib" / PACKAGE / name] = target
    return links


def sync_links(venv: Path) -> None:
    links = wanted_links(venv)
    managed = [venv / "share" / PACKAGE, venv / "lib" / PACKAGE]
    for root in managed:                       # drop what is no longer wanted (only links we made)
        for path in sorted(root.rglob("*")) if root.is_dir() else ():
            if path.is_symlink() and path not in links:
                path.unlink()
    for link, target in links.items():
        link.parent.mkdir(parents=True, exist_ok=True)
        relative = os.path.relpath(target, link.parent)
        if link.is_symlink() and os.readlink(link) == relative:
            continue
        if link.is_symlink() or link.is_file():
            link.unlink()
        link.symlink_to(relative)


def patch_activate(venv: Path) -> None:
    activate = venv / "bin" / "activate"
    text = activate.read_text(encoding="utf-8")
    if ACTIVATE_BEGIN in text:                 # replace an older block
        head, _, rest = text.partition(ACTIVATE_BEGIN)
        text = head + rest.partition(ACTIVATE_END + "\n")[2]
    activate.write_text(text.rstrip("\n") + "\n\n" + ACTIVATE_BLOCK, encoding="utf-8")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    venv = Path(argv[1]).absolute()
    sync_links(venv)
    patch_activate(venv)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
