"""The parameter schema (robot_bridge.ros.params) without a node: constraints in words and refusals."""

from __future__ import annotations

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


def test_every_schema_entry_is_well_formed():
    """Names unique, defaults satisfy their own constraints, every parameter described."""
    for schema in (controller.PARAMETERS, description.PARAMETERS, sensor_bridge.PARAMETERS,
                   sensor_bridge.SENSOR_PARAMETERS, world.PARAMETERS):
        names = [p.name for p in schema]
        assert len(names) == len(set(names))
        for p in schema:
            assert p.description, p.name
            default = [] if isinstance(p.default, params.EmptyArray) else p.default
            assert p.refusal(default) is None, p.name


def test_bare_tuples_become_params():
    (p,) = params.schema(("x", 1, "an x"))
    assert p == Param("x", 1, "an x")
    name, default, text = p
    assert (name, default, text) == ("x", 1, "an x")


def test_readme_parameter_tables_match_the_schemas():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert readme.count("<!-- parameters: ") == 5
    assert params.update_readme(readme) == readme, \
        "README parameter tables are stale: run python -m robot_bridge.ros.params README.md"
