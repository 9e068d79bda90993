"""The venv's interface subsets (tools/venv_interfaces: vision_msgs, moveit_msgs and the two packages it
depends on) are upstream's: the same files, fields, constants and RIHS01 type hashes.  Venv side: what the
middleware announces for a live publisher (the compiled type support) and the type descriptions the build
installed; upstream side: the hash rosidl computes from ../shared/ros2-tools' own definition files."""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path

import pytest
from fixtures.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
SHARED = (REPO / ".." / "shared" / "ros2-tools").resolve()
VENV_INTERFACES = REPO / "tools" / "venv_interfaces"
# package -> the packages its definitions refer to (rosidl needs their share/ folders for the hashes)
PACKAGES = {
    "vision_msgs": ("std_msgs", "geometry_msgs", "builtin_interfaces"),
    "object_recognition_msgs": (),
    "octomap_msgs": ("std_msgs", "geometry_msgs", "builtin_interfaces"),
    "moveit_msgs": ("std_msgs", "geometry_msgs", "builtin_interfaces", "sensor_msgs", "shape_msgs",
                    "trajectory_msgs", "action_msgs", "unique_identifier_msgs", "service_msgs",
                    "octomap_msgs", "object_recognition_msgs"),
}
KINDS = {"msg": ".msg", "srv": ".srv", "action": ".action"}


def _upstream(package: str) -> Path:
    return SHARED / package / package


def _subset(package: str) -> list[tuple[str, str]]:
    """(kind, name) of every definition the venv package holds."""
    return sorted((kind, f.stem) for kind, suffix in KINDS.items()
                  for f in (VENV_INTERFACES / package / kind).glob(f"*{suffix}"))


def _share(package: str) -> Path:
    """share/<package> of the installed interfaces (the venv, or the prefixes of a sourced ROS 2)."""
    prefixes = [sys.prefix, *[p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]]
    for prefix in prefixes:
        if (Path(prefix) / "share" / package / "package.xml").is_file():
            return Path(prefix) / "share" / package
    pytest.skip(f"share/{package} not found in {prefixes}")


def _require_upstream(package: str) -> Path:
    if not (_upstream(package) / "package.xml").is_file():
        pytest.skip(f"upstream {package} not found at {_upstream(package)} "
                    "(../shared is on developer/CI machines)")
    return _upstream(package)


def _upstream_hashes(package: str, out: Path) -> dict[str, str]:
    """type name -> RIHS01 hash computed by rosidl from the upstream definitions of the subset."""
    pytest.importorskip("rosidl_generator_type_description")
    from rosidl_adapter.action import convert_action_to_idl
    from rosidl_adapter.msg import convert_msg_to_idl
    from rosidl_adapter.srv import convert_srv_to_idl
    from rosidl_generator_type_description import generate_type_hash

    convert = {"msg": convert_msg_to_idl, "srv": convert_srv_to_idl, "action": convert_action_to_idl}
    upstream = _require_upstream(package)
    tuples = []
    saved = sys.stdout
    sys.stdout = open(os.devnull, "w")         # the adapter prints every file it reads and writes
    try:
        for kind, name in _subset(package):
            idl_dir = out / "idl" / kind
            idl_dir.mkdir(parents=True, exist_ok=True)
            convert[kind](upstream, package, Path(kind) / f"{name}{KINDS[kind]}", idl_dir)
            tuples.append(f"{out / 'idl'}:{kind}/{name}.idl")
    finally:
        sys.stdout.close()
        sys.stdout = saved
    args = {"package_name": package, "output_dir": str(out / "json"), "idl_tuples": tuples,
            "include_paths": [f"{p}:{_share(p)}" for p in PACKAGES[package]]}
    args_file = out / "args.json"
    args_file.write_text(json.dumps(args))
    hashes = {}
    for path in generate_type_hash(str(args_file)):
        for item in json.loads(Path(path).read_text())["type_hashes"]:
            hashes[item["type_name"]] = item["hash_string"]
    return hashes


@pytest.fixture(scope="module")
def upstream_hashes(tmp_path_factory):
    cache: dict[str, dict[str, str]] = {}

    def get(package: str) -> dict[str, str]:
        if package not in cache:
            cache[package] = _upstream_hashes(package, tmp_path_factory.mktemp(f"{package}_upstream"))
        return cache[package]
    return get


ALL = [(package, kind, name) for package in PACKAGES for kind, name in _subset(package)]
MESSAGES = [(package, name) for package, kind, name in ALL if kind == "msg"]


@pytest.mark.parametrize("package", PACKAGES)
def test_venv_package_holds_upstream_definitions_unmodified(package):
    upstream = _require_upstream(package)
    assert _subset(package), f"tools/venv_interfaces/{package} holds no definitions"
    for kind, name in _subset(package):
        rel = Path(kind) / f"{name}{KINDS[kind]}"
        assert (VENV_INTERFACES / package / rel).read_bytes() == (upstream / rel).read_bytes(), rel


@pytest.mark.parametrize("package", PACKAGES)
def test_subset_is_closed(package):
    """Every type a definition of the subset names is in the subset or in a package it depends on."""
    from rosidl_adapter.parser import parse_message_string

    names = {name for _kind, name in _subset(package)}
    for kind, name in _subset(package):
        text = (VENV_INTERFACES / package / kind / f"{name}{KINDS[kind]}").read_text()
        for part in text.split("\n---\n"):
            for field in parse_message_string(package, name, part).fields:
                if field.type.is_primitive_type():
                    continue
                owner = field.type.pkg_name or package
                if owner == package:
                    assert field.type.type in names, f"{package}/{kind}/{name}: {field.type.type} missing"
                else:
                    assert owner in PACKAGES[package], f"{package}/{kind}/{name}: depends on {owner}"


@pytest.mark.parametrize("package,kind,name", ALL)
def test_installed_type_hash_equals_upstream(package, kind, name, upstream_hashes):
    """The type description the venv build installed (share/<pkg>/<kind>/<name>.json) hashes as upstream's."""
    installed = json.loads((_share(package) / kind / f"{name}.json").read_text())
    ours = {item["type_name"]: item["hash_string"] for item in installed["type_hashes"]}
    theirs = upstream_hashes(package)
    type_name = f"{package}/{kind}/{name}"
    assert ours[type_name] == theirs[type_name]
    assert theirs[type_name].startswith("RIHS01_")


@pytest.mark.parametrize("package,name", MESSAGES)
def test_announced_type_hash_equals_upstream(package, name, upstream_hashes, ros_process):
    """What the compiled type support announces for a live publisher equals upstream's hash."""
    msg_type = getattr(importlib.import_module(f"{package}.msg"), name)
    expected = upstream_hashes(package)[f"{package}/msg/{name}"]
    node = ros_process("hash").node(f"hash_{package}_{name.lower()}")
    topic = f"/type_hash_{package}_{name.lower()}"
    node.create_publisher(msg_type, topic, 1)
    wait_until(lambda: node.get_publishers_info_by_topic(topic), 20.0, f"a publisher on {topic}")
    assert str(node.get_publishers_info_by_topic(topic)[0].topic_type_hash) == expected


@pytest.mark.parametrize("package,name", MESSAGES)
def test_fields_and_constants_equal_upstream(package, name):
    from rosidl_adapter.parser import parse_message_string

    upstream = _require_upstream(package)
    parsed = parse_message_string(package, name, (upstream / "msg" / f"{name}.msg").read_text())
    msg_type = getattr(importlib.import_module(f"{package}.msg"), name)
    fields = msg_type.get_fields_and_field_types()
    assert list(fields) == [f.name for f in parsed.fields]
    for constant in parsed.constants:
        value = getattr(msg_type, constant.name)
        if constant.type == "byte":                 # rclpy gives a byte constant as a bytes object
            value = value[0]
        assert value == constant.value, constant.name
