"""Our control_msgs (tools/venv_interfaces, or the ROS 2 install's) equal upstream's: RIHS01 type hashes,
and constants, defaults and field order (the generated IDL).

Upstream's hashes are computed once per session with rosidl's own generators (rosidl_adapter .msg/.action
-> .idl, rosidl_generator_type_description) from ../shared/ros2-tools/control_msgs against the same
dependency type descriptions (builtin_interfaces, std_msgs, trajectory_msgs, ...) ours were built with.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
UPSTREAM = (REPO / ".." / "shared" / "ros2-tools" / "control_msgs" / "control_msgs").resolve()
DEFINITIONS = ["action/FollowJointTrajectory.action", "action/GripperCommand.action",
               "msg/GripperCommand.msg", "msg/JointTolerance.msg", "msg/JointComponentTolerance.msg",
               "msg/JointTrajectoryControllerState.msg"]
DEPENDENCIES = ["action_msgs", "builtin_interfaces", "geometry_msgs", "service_msgs", "std_msgs",
                "trajectory_msgs", "unique_identifier_msgs"]



def _share(package: str) -> Path:
    """share/<package> of the prefix its Python module is installed in (the venv, or /opt/ros/<distro>)."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        pytest.skip(f"{package} is not installed (run make setup)")
    # <prefix>/lib/pythonX.Y/site-packages/<package>/__init__.py
    share = Path(spec.origin).resolve().parents[4] / "share" / package
    if not share.is_dir():
        pytest.skip(f"{package}'s type descriptions not found at {share}")
    return share


@pytest.fixture(scope="session")
def upstream(tmp_path_factory) -> Path:
    """Upstream's generated IDL and type-description JSON, in a temporary share-like folder."""
    if not UPSTREAM.is_dir():
        pytest.skip(f"upstream control_msgs not found at {UPSTREAM}")
    adapter_msg = pytest.importorskip("rosidl_adapter.msg")
    adapter_action = pytest.importorskip("rosidl_adapter.action")
    type_description = pytest.importorskip("rosidl_generator_type_description")
    out = tmp_path_factory.mktemp("upstream_control_msgs")
    idl_tuples = []
    with contextlib.redirect_stdout(io.StringIO()):              # the adapters print each file
        for rel in DEFINITIONS:
            rel_path = Path(rel)
            convert = adapter_action.convert_action_to_idl if rel_path.suffix == ".action" \
                else adapter_msg.convert_msg_to_idl
            (out / rel_path.parent).mkdir(exist_ok=True)
            convert(UPSTREAM, "control_msgs", rel_path, out / rel_path.parent)
            idl_tuples.append(f"{out}:{rel_path.with_suffix('.idl').as_posix()}")
    arguments = out / "arguments.json"
    arguments.write_text(json.dumps({
        "package_name": "control_msgs", "output_dir": str(out), "idl_tuples": idl_tuples,
        "include_paths": [f"{dep}:{_share(dep)}" for dep in DEPENDENCIES]}))
    type_description.generate_type_hash(str(arguments))
    return out


def _hashes(json_file: Path) -> dict[str, str]:
    content = json.loads(json_file.read_text())
    return {entry["type_name"]: entry["hash_string"] for entry in content["type_hashes"]}


@pytest.mark.parametrize("definition", DEFINITIONS)
def test_type_hashes_equal_upstream(upstream, definition):
    ours = _hashes(_share("control_msgs") / Path(definition).with_suffix(".json"))
    theirs = _hashes(upstream / Path(definition).with_suffix(".json"))
    assert ours == theirs
    assert all(h.startswith("RIHS01_") for h in ours.values())
    # an action's file also holds its Goal, Result, Feedback and the services and messages of the protocol
    assert len(ours) >= (9 if definition.endswith(".action") else 1)


@pytest.mark.parametrize("definition", DEFINITIONS)
def test_constants_defaults_and_comments_equal_upstream(upstream, definition):
    """The hash leaves out constants and default values: the IDL (which carries them) must match too."""
    idl = Path(definition).with_suffix(".idl")
    assert (_share("control_msgs") / idl).read_text() == (upstream / idl).read_text()


def test_python_types_carry_the_upstream_error_codes():
    action = pytest.importorskip("control_msgs.action")
    result = action.FollowJointTrajectory.Result
    codes = {name: getattr(result, name) for name in ("SUCCESSFUL", "INVALID_GOAL", "INVALID_JOINTS",
                                                      "OLD_HEADER_TIMESTAMP", "PATH_TOLERANCE_VIOLATED",
                                                      "GOAL_TOLERANCE_VIOLATED")}
    assert codes == {"SUCCESSFUL": 0, "INVALID_GOAL": -1, "INVALID_JOINTS": -2, "OLD_HEADER_TIMESTAMP": -3,
                     "PATH_TOLERANCE_VIOLATED": -4, "GOAL_TOLERANCE_VIOLATED": -5}
