"""The venv's vision_msgs subset (tools/venv_interfaces) is upstream's: same fields, types, constants and
RIHS01 type hashes.  Venv side: what the middleware announces for a live publisher (the compiled type
support); upstream side: the hash rosidl computes from ../shared/ros2-tools/vision_msgs' own .msg files."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
UPSTREAM = (REPO / ".." / "shared" / "ros2-tools" / "vision_msgs" / "vision_msgs").resolve()
VENV_PKG = REPO / "tools" / "venv_interfaces" / "vision_msgs"
SUBSET = ["ObjectHypothesis", "ObjectHypothesisWithPose", "BoundingBox3D", "Detection3D", "Detection3DArray"]


def _share(package: str) -> Path:
    """share/<package> of the installed interfaces (the venv, or the prefixes of a sourced ROS 2)."""
    prefixes = [sys.prefix, *[p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]]
    for prefix in prefixes:
        if (Path(prefix) / "share" / package / "msg").is_dir():
            return Path(prefix) / "share" / package
    pytest.skip(f"share/{package}/msg not found in {prefixes}")


@pytest.fixture(scope="module")
def upstream_hashes(tmp_path_factory) -> dict[str, str]:
    """type name -> RIHS01 hash computed by rosidl from the upstream .msg files."""
    if not (UPSTREAM / "msg").is_dir():
        pytest.skip(f"upstream vision_msgs not found at {UPSTREAM} (../shared is on developer/CI machines)")
    pytest.importorskip("rosidl_generator_type_description")
    from rosidl_adapter.msg import convert_msg_to_idl
    from rosidl_generator_type_description import generate_type_hash

    out = tmp_path_factory.mktemp("vision_msgs_upstream")
    idl_dir = out / "idl" / "msg"
    idl_dir.mkdir(parents=True)
    saved = sys.stdout
    sys.stdout = open(os.devnull, "w")         # the adapter prints every file it reads and writes
    try:
        tuples = []
        for msg in sorted((UPSTREAM / "msg").glob("*.msg")):
            convert_msg_to_idl(UPSTREAM, "vision_msgs", Path("msg") / msg.name, idl_dir)
            tuples.append(f"{out / 'idl'}:msg/{msg.stem}.idl")
    finally:
        sys.stdout.close()
        sys.stdout = saved
    args = {"package_name": "vision_msgs", "output_dir": str(out / "json"), "idl_tuples": tuples,
            "include_paths": [f"{p}:{_share(p)}"
                              for p in ("std_msgs", "geometry_msgs", "builtin_interfaces")]}
    args_file = out / "args.json"
    args_file.write_text(json.dumps(args))
    hashes = {}
    for path in generate_type_hash(str(args_file)):
        for item in json.loads(Path(path).read_text())["type_hashes"]:
            hashes[item["type_name"]] = item["hash_string"]
    return hashes


def test_venv_package_holds_upstream_definitions_unmodified():
    if not (UPSTREAM / "msg").is_dir():
        pytest.skip(f"upstream vision_msgs not found at {UPSTREAM}")
    for name in SUBSET:
        ours, theirs = VENV_PKG / "msg" / f"{name}.msg", UPSTREAM / "msg" / f"{name}.msg"
        assert ours.read_text() == theirs.read_text()


@pytest.mark.parametrize("name", SUBSET)
def test_type_hash_equals_upstream(name, upstream_hashes, ros_process, wait_for):
    import vision_msgs.msg

    msg_type = getattr(vision_msgs.msg, name)
    node = ros_process("hash").node(f"hash_{name.lower()}")
    topic = f"/type_hash_{name.lower()}"
    node.create_publisher(msg_type, topic, 1)
    assert wait_for(lambda: node.get_publishers_info_by_topic(topic))
    announced = node.get_publishers_info_by_topic(topic)[0].topic_type_hash
    expected = upstream_hashes[f"vision_msgs/msg/{name}"]
    assert str(announced) == expected
    assert expected.startswith("RIHS01_")


@pytest.mark.parametrize("name", SUBSET)
def test_fields_and_constants_equal_upstream(name):
    if not (UPSTREAM / "msg").is_dir():
        pytest.skip(f"upstream vision_msgs not found at {UPSTREAM}")
    import vision_msgs.msg
    from rosidl_adapter.parser import parse_message_string

    upstream = parse_message_string("vision_msgs", name, (UPSTREAM / "msg" / f"{name}.msg").read_text())
    msg_type = getattr(vision_msgs.msg, name)
    fields = msg_type.get_fields_and_field_types()
    assert list(fields) == [f.name for f in upstream.fields]
    for f in upstream.fields:
        base = f.type.pkg_name + "/" + f.type.type if f.type.pkg_name else f.type.type
        base = base.replace("float64", "double")
        text = fields[f.name]
        expected = f"sequence<{base}>" if f.type.is_array and f.type.array_size is None else base
        assert text == expected, (f.name, text, expected)
    for constant in upstream.constants:
        assert getattr(msg_type, constant.name) == constant.value
