"""Expression parser fuzzing: any text compiles or raises ExpressionError; a compiled formula
evaluates to a float (NaN/inf allowed) for any values, never raising."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from robot_bridge.errors import ExpressionError
from robot_bridge.kinematics.expr import compile_expression

NAMES = ("j1", "j2", "arm.joint-3")
TOKENS = st.sampled_from([
    "j1", "j2", "arm.joint-3", "x", "pi", "(", ")", ",", ";", ":=", "+", "-", "*", "/", "^", "%", "!", "&",
    "|",
    "=", "!=", "<", "<=", ">", ">=", "0", "1", "2.5", "1e400", "1e-400", ".5", "3.", "sin", "cos", "atan2",
    "sqrt", "log", "exp", "pow", "min", "max", "abs", "if", "polyroots2", "polyroots3", "polyroots4", "SSSA",
    "SASA", "SASS", "asin", "acos", " ", "\t", "t", "t:=", "@", "#", "\u00e9", "\x00"])
FORMULAS = st.one_of(st.lists(TOKENS, max_size=40).map("".join), st.text(max_size=80))
VALUES = st.floats(allow_nan=True, allow_infinity=True)


@settings.get_profile("fuzz")
@given(text=FORMULAS, a=VALUES, b=VALUES, c=VALUES)
def test_compile_and_evaluate_never_crash(text, a, b, c):
    try:
        expr = compile_expression(text, variables=NAMES)
    except ExpressionError as err:
        assert "\n" not in str(err)
        return
    env = dict(zip(NAMES, (a, b, c)))
    assert isinstance(expr.evaluate(env), float)
    assert all(isinstance(v, float) for v in expr.evaluate_all(env))
    assert isinstance(expr.evaluate_within(env, -math.pi, math.pi, circular=True), float)


@settings.get_profile("fuzz")
@given(depth=st.integers(min_value=0, max_value=5000), op=st.sampled_from(["(", "-", "sin(", "!", "+("]))
def test_deep_nesting_is_an_expression_error(depth, op):
    close = ")" * op.count("(") * depth
    try:
        compile_expression(op * depth + "j1" + close, variables=NAMES)
    except ExpressionError:
        pass
