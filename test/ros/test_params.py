"""The parameter schema (robot_bridge.ros.params) without a node: constraints in words and refusals."""

from __future__ import annotations

import pytest

from robot_bridge.nodes import controller, description, sensor_bridge, world
from robot_bridge.ros import params
from robot_bridge.ros.params import Param


def test_refusal_names_parameter_value_and_rule():
    rate = Param("rate", 1.0, "Hz", range=(0.1, 100.0))
    assert rate.refusal(50.0) is None
    assert rate.refusal(-1.0) == "rate=-1.0 is outside [0.1, 100.0]"
    assert rate.refusal(float("nan")) == "rate=nan is outside [0.1, 100.0]"
    kind = Param("kind", "a", "", choices=("a", "b"))
    assert kind.refusal("b") is None
    assert kind.refusal("foo") == "kind='foo' is not one of: 'a', 'b'"
    bias = Param("bias", params.DOUBLE_ARRAY, "", lengths=(0, 3))
    assert bias.refusal([]) is None and bias.refusal([1.0, 2.0, 3.0]) is None
    assert bias.refusal([1.0]) == "bias has 1 values; expected 0 or 3"
    ids = Param("ids", params.INTEGER_ARRAY, "", range=(1, 127))
    assert ids.refusal([1, 128]) == "ids=128 is outside [1, 127]"


def test_mode_reads_yaml_false_as_off():
    mode = sensor_bridge.SENSOR_PARAMETERS[0]
    assert mode.name == "mode"
    assert mode.refusal(False) is None and mode.refusal("sim") is None
    assert "is not one of" in mode.refusal("simulate")


def test_constraints_text_states_choices_lengths_and_restart():
    hardware = next(p for p in controller.PARAMETERS if p.name == "hardware")
    assert hardware.constraints() == "one of: sim, canopen; read-only (set at start-up)"
    cov = next(p for p in sensor_bridge.SENSOR_PARAMETERS if p.name == "orientation_covariance")
    assert cov.constraints().startswith("length 0 or 9")


def test_bare_tuples_become_params():
    (p,) = params.schema(("x", 1, "an x"))
    assert p == Param("x", 1, "an x")
    name, default, text = p
    assert (name, default, text) == ("x", 1, "an x")


def test_the_schema_module_knows_no_node():
    """Issue 31: robot_bridge/ros/params.py imported every node's PARAMETERS back (up the layers)."""
    import ast
    from pathlib import Path

    tree = ast.parse(Path(params.__file__).read_text())
    imported = {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                 for alias in node.names}
    assert not [m for m in imported if "nodes" in m.split(".")], imported


SCHEMAS = {"controller_node": controller.PARAMETERS, "description_node": description.PARAMETERS,
           "sensor_bridge": sensor_bridge.PARAMETERS, "sensors.<name>": sensor_bridge.SENSOR_PARAMETERS,
           "world_node": world.PARAMETERS}


@pytest.mark.parametrize("value, said", [
    ("a b\x00c", "control character '\\x00' at index 3"),          # NUL first: it is what cuts the name
    ("arm\x00", "control character '\\x00' at index 3"),
    ("r2/\x1b[31m", "control character '\\x1b' at index 3"),       # a terminal escape in logs
    ("base\nlink", "control character '\\n' at index 4"),          # a forged log line
    ("\x7fx", "control character '\\x7f' at index 0"),
    ("a b", "whitespace ' ' at index 1"),                       # what the rcl YAML parser leaves of a b\0c
    ("arm\u00a0", "whitespace '\\xa0' at index 3"),
    ("/world", "leading '/'"),                                  # tf2 refuses such ids in every lookup
])
def test_frame_names_refuse_control_characters_whitespace_and_a_leading_slash(value, said):
    reason = params.string_refusal(value, "frame")
    assert reason is not None and reason.startswith(said), reason
    assert "tf2 frame id" in reason


def test_names_and_texts_refuse_control_characters():
    for ok in ("r2/", "arm1/base-link.0", "world", "", "wrist_camera_optical_frame"):
        assert params.string_refusal(ok, "frame") is None, ok
    assert params.string_refusal("/driver/scan", "name") is None                # topics may be absolute
    assert "whitespace" in params.string_refusal("driver scan", "name")
    assert params.string_refusal("/home/me/My Robots/arm.urdf", "text") is None   # paths may hold spaces
    assert "control character '\\x00'" in params.string_refusal("/etc/passwd\x00.urdf", "text")
    assert "at index 1" in params.string_refusal(["ok", "b\tc"], "name")     # each of an array


def test_every_frame_name_and_path_parameter_is_checked():
    """Frame parameters are frame ids; topic and controller names are names; every file, folder and search
    path parameter refuses control characters and is read-only or confined to the launch-time roots."""
    frames = {(node, p.name) for node, schema in SCHEMAS.items() for p in schema
              if p.string in ("frame", "prefix")}
    prefixes = {(node, p.name) for node, schema in SCHEMAS.items() for p in schema if p.string == "prefix"}
    assert prefixes == {f for f in frames if f[1].endswith("_prefix")}          # ROS name prefixes
    assert frames == {("description_node", "frame_prefix"), ("description_node", "world_frame"),
                      ("description_node", "environment_prefix"), ("world_node", "frame_prefix"),
                      ("world_node", "world_frame"), ("sensor_bridge", "frame_prefix"),
                      ("controller_node", "frame_prefix")}
    for node, schema in SCHEMAS.items():
        for p in schema:
            if p.name.endswith(("_topic", "_namespace")) or p.name == "controllers":
                assert p.string == "name", (node, p.name)
            if p.name.endswith(("_file", "_dir", "search_path", ".eds")):
                assert p.string == "text" and (p.read_only or p.confined), (node, p.name)
            if p.confined:
                assert CONFINED in p.constraints(), (node, p.name)
    widening = {"mesh_dir", "mesh_cache_dir", "mesh_uri", "mesh_http_host", "mesh_http_port"}
    assert {p.name for p in description.PARAMETERS if p.name in widening and p.read_only} == widening
    assert {p.name for p in description.PARAMETERS if p.confined} == {"description_file", "srdf_file",
                                                                       "search_path"}
    assert {p.name for p in world.PARAMETERS if p.confined} == {"objects_file", "description_file",
                                                                     "search_path"}


CONFINED = "at run time only under the folders trusted at launch"


def test_launch_roots_hold_the_files_folders_and_the_search_path(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENRAVE_DATA", raising=False)
    monkeypatch.delenv("ROBOT_BRIDGE_ALLOWED_ROOTS", raising=False)
    robots, meshes, outside = tmp_path / "robots", tmp_path / "meshes", tmp_path / "outside"
    for folder in (robots / "more", meshes, outside):
        folder.mkdir(parents=True)
    (robots / "escape").symlink_to(outside)                    # a link planted in a trusted folder
    roots = params.launch_roots([str(robots / "arm.urdf"), ""], [str(meshes)])
    assert set(roots.roots) == {robots, meshes}

    for inside in ("", str(robots / "other.urdf"), str(robots / "more" / "x.srdf"), [str(meshes / "sub")]):
        assert params.confined_refusal("p", inside, roots) is None, inside
    for value, real in (("/etc/passwd", "/etc/passwd"), (["/", "/etc"], "/"), (str(meshes / ".." / "outside"),
                        str(outside)), (str(robots / "escape" / "a.urdf"), str(outside / "a.urdf"))):
        reason = params.confined_refusal("description_file", value, roots)
        assert reason is not None and f"resolves to {real}, outside the folders trusted at launch" in reason
        assert str(robots) in reason and "set it at launch" in reason

    monkeypatch.setenv("OPENRAVE_DATA", str(outside))           # the launch environment is trusted too
    assert params.confined_refusal("p", str(outside / "a.urdf"), params.launch_roots([], [])) is None


def test_a_refusal_quotes_a_huge_value_clipped():
    frame_prefix = next(p for p in description.PARAMETERS if p.name == "frame_prefix")
    reason = frame_prefix.refusal("x" * 1_000_000 + " ")
    assert reason.startswith("frame_prefix='xxx") and "(1000003 characters)" in reason and len(reason) < 500
