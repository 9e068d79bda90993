"""kinematics/expr: fparser-syntax mimic formulas, checked against hand-derived values and math.*."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from robot_bridge.errors import DescriptionError, ExpressionError
from robot_bridge.formats import xmlsafe
from robot_bridge.kinematics.expr import MAX_DEPTH, MAX_LENGTH, compile_expression, parse_partials


def value(text, **variables):
    return compile_expression(text, variables=variables.keys()).evaluate(variables)


# -- syntax: precedence and associativity (expected values derived by hand) ---------------------------
@pytest.mark.parametrize("text, expected", [
    ("1+2*3", 7), ("(1+2)*3", 9), ("8-4-2", 2), ("8/4/2", 1), ("2*3/4", 1.5), ("8/2*4", 16),
    ("2^3^2", 512),            # right-associative
    ("-2^2", -4),              # ^ binds tighter than unary minus
    ("(-2)^2", 4), ("2^-1", 0.5), ("-2^-2", -0.25), ("2*3^2", 18), ("(2*3)^2", 36), ("2^3*2", 16),
    ("2*-3", -6), ("-3*-2", 6), ("- -2", 2), ("1-(-1)", 2), ("-2^2+1", -3), ("+0.25", 0.25),
    (".5+1e-3", 0.501), ("1e3", 1000), ("2.5E+1", 25), ("3.", 3), ("7%4", 3), ("-7%4", -3),
    ("1+2<4", 1), ("4<1+2", 0), ("2<=2", 1), ("3>=4", 0), ("3>2", 1), ("1=1", 1), ("1!=1", 0),
    ("1=1+1e-13", 1),          # fparser compares with epsilon 1e-12
    ("1<2&2<1", 0), ("1<2|2<1", 1), ("1|0&0", 1),   # & binds tighter than |
    ("!0", 1), ("!1", 0), ("!0.4", 1), ("-1<0", 1), ("if(1,2,3)", 2), ("if(0.4,2,3)", 3),
    ("1 +\n 2 *\t3", 7), ("pi", math.pi), ("2*pi/4", math.pi / 2),
    ("x := 2; y := x*3; y+x", 8), ("x:=2;x^2", 4), ("  x := 1 ;\n x + 1 ", 2),
])
def test_precedence_and_literals(text, expected):
    assert value(text) == pytest.approx(expected, rel=1e-15, abs=0)


@pytest.mark.parametrize("text, expected", [
    ("JF1/3+0.8727", 0.9 / 3 + 0.8727), ("-jfinger_L", -0.9), ("-P2+P3-P4", -2 + 3 - 4),
    ("J_0*2", 1.8),
])
def test_joint_names_as_variables(text, expected):
    values = {"JF1": 0.9, "jfinger_L": 0.9, "P2": 2.0, "P3": 3.0, "P4": 4.0, "J_0": 0.9}
    assert compile_expression(text, variables=values).evaluate(values) == pytest.approx(expected)


def test_names_with_symbols_when_variables_are_known():
    # OpenRAVE substitutes joint names textually, so '-' and '.' in names work there too
    names = ["Finger0-1", "arm.j1", "Finger0"]
    e = compile_expression("Finger0-1*2 + arm.j1 - Finger0", variables=names)
    assert e.variables == {"Finger0-1", "arm.j1", "Finger0"}
    assert e.evaluate({"Finger0-1": 1.0, "arm.j1": 3.0, "Finger0": 0.5}) == 4.5


# -- every function against math.* ---------------------------------------------------------------------
@pytest.mark.parametrize("name, args, expected", [
    ("sin", (0.3,), math.sin(0.3)), ("cos", (0.3,), math.cos(0.3)), ("tan", (0.3,), math.tan(0.3)),
    ("asin", (0.3,), math.asin(0.3)), ("acos", (0.3,), math.acos(0.3)), ("atan", (3.0,), math.atan(3.0)),
    ("atan2", (-1.0, -2.0), math.atan2(-1.0, -2.0)), ("sqrt", (2.0,), math.sqrt(2.0)),
    ("exp", (1.5,), math.exp(1.5)), ("log", (2.0,), math.log(2.0)), ("log10", (2.0,), math.log10(2.0)),
    ("log2", (3.0,), math.log2(3.0)), ("abs", (-2.5,), 2.5), ("min", (2.0, -1.0), -1.0),
    ("max", (2.0, -1.0), 2.0), ("pow", (2.0, 0.5), math.sqrt(2.0)), ("floor", (-1.5,), -2.0),
    ("ceil", (-1.5,), -1.0), ("trunc", (-1.7,), -1.0), ("int", (-2.5,), -3.0), ("int", (2.4,), 2.0),
    ("sinh", (0.7,), math.sinh(0.7)), ("cosh", (0.7,), math.cosh(0.7)), ("tanh", (0.7,), math.tanh(0.7)),
    ("asinh", (0.7,), math.asinh(0.7)), ("acosh", (1.7,), math.acosh(1.7)),
    ("atanh", (0.7,), math.atanh(0.7)), ("cbrt", (-8.0,), -2.0), ("exp2", (3.0,), 8.0),
    ("hypot", (3.0, 4.0), 5.0), ("cot", (0.3,), 1 / math.tan(0.3)), ("sec", (0.3,), 1 / math.cos(0.3)),
    ("csc", (0.3,), 1 / math.sin(0.3)),
    # OpenRAVE's triangle helpers: sides 3-4-5 (angle opposite 3 is asin(3/5)); law of cosines
    ("SSSA", (3.0, 4.0, 5.0), math.asin(3 / 5)), ("SASS", (3.0, math.pi / 2, 4.0), 5.0),
    ("SASA", (3.0, math.pi / 2, 4.0), math.atan2(3.0, 4.0)),
])
def test_functions_match_math(name, args, expected):
    names = [f"v{i}" for i in range(len(args))]
    e = compile_expression(f"{name}({', '.join(names)})", variables=names)
    assert e.evaluate(dict(zip(names, args))) == pytest.approx(expected, rel=1e-14)
    # the same call with literal arguments is folded at compile time to the same value
    assert value(f"{name}({', '.join(map(repr, args))})") == pytest.approx(expected, rel=1e-14)


# -- math domain errors: NaN (fparser reports an eval error), overflow: inf ---------------------------
@pytest.mark.parametrize("text", [
    "asin(2)", "acos(-1.5)", "log(-1)", "log(0)", "log10(0)", "sqrt(-1)", "1/x", "x^-1", "(-8)^(1/3)",
    "pow(-8, 1/3)", "acosh(0.5)", "atanh(1)", "7%x", "1 + 2*asin(x+2)", "a := sqrt(x-1); 1",
])
def test_domain_errors_give_nan(text):
    assert math.isnan(compile_expression(text, ["x"]).evaluate({"x": 0.0}))


@pytest.mark.parametrize("text, expected", [
    ("exp(1000)", math.inf), ("10^400", math.inf), ("(-10)^401", -math.inf), ("cosh(x+1000)", math.inf),
    ("-exp(x+1000)", -math.inf), ("1/exp(x+1000)", 0.0),
])
def test_overflow_gives_inf(text, expected):
    assert compile_expression(text, ["x"]).evaluate({"x": 0.0}) == expected


# -- multi-statement polyroots formula from the corpus (arm_bucket_assy joint P4) ---------------------
def _poly_in_a(text: str) -> np.ndarray:
    """Coefficients (ascending powers of A) of a sum like '3.9 + 23.2*A - 48.9*A^2'."""
    coeffs = np.zeros(5)
    compact = text.replace(" ", "")
    terms = re.findall(r"([+-]?)([0-9.]+(?:e[+-]?\d+)?)(\*A(?:\^(\d))?)?", compact)
    assert "".join(s + n + a for s, n, a, _ in terms) == compact.lstrip("+")
    for sign, number, has_a, power in terms:
        coeffs[int(power or 1) if has_a else 0] += float(sign + number)
    return coeffs


@pytest.fixture(scope="module")
def p4_formula(corpus):
    path = corpus / "openrave" / "test" / "testdata" / "arm_bucket_assy_Amimic.robot.xml"
    root = xmlsafe.parse_file(path).getroot()
    (joint,) = [j for j in root.iter("Joint") if j.get("name") == "P4"]
    return joint.get("mimic_pos")


def test_polyroots_formula_matches_numpy_roots(p4_formula):
    inner = p4_formula[p4_formula.index("polyroots6(") + len("polyroots6("):p4_formula.index(");")]
    polys = [_poly_in_a(c) for c in inner.split(",")]
    assert len(polys) == 7 and p4_formula.rstrip().endswith("2*atan(dummy)")
    e = compile_expression(p4_formula, variables=["A", "P0", "P1"])
    assert e.variables == {"A"} and e.is_multi and e.as_linear() is None
    for a in (-0.2, 0.0, 0.1, 0.35):
        coeffs = [np.polynomial.polynomial.polyval(a, p) for p in polys]   # highest power first
        roots = np.roots(coeffs)
        real = np.sort(roots[np.abs(roots.imag) < 1e-8].real)
        expected = 2 * np.arctan(real)
        got = e.evaluate_all({"A": a})
        assert len(got) == len(expected) >= 1
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)
        assert e.evaluate({"A": a}) == pytest.approx(expected[0])


def test_root_choice_by_joint_limits(p4_formula):
    e = compile_expression(p4_formula, variables=["A"])
    both = e.evaluate_all({"A": 0.1})
    assert len(both) == 2 and both[0] < -0.1 < 0 < both[1] < 2
    # P4's limits in the file are [-0.1, 2]: OpenRAVE keeps the root inside them
    assert e.evaluate_within({"A": 0.1}, -0.1, 2.0) == both[1]
    assert e.evaluate_within({"A": 0.1}, -0.1, 2.0, circular=True) == both[0]
    # no candidate inside: the first one clamped; a scalar formula is clamped the same way
    assert e.evaluate_within({"A": 0.1}, 0.5, 1.0) == 0.5
    assert compile_expression("2*J").evaluate_within({"J": 1.0}, -1.0, 1.5) == 1.5
    assert compile_expression("2*J").evaluate_within({"J": 0.5 + 1e-13}, -1.0, 1.0) == 1.0
    assert math.isnan(compile_expression("sqrt(J)").evaluate_within({"J": -1.0}, -1.0, 1.0))


def test_polyroots_semantics():
    # (x-1)(x-2)(x^2+1): two real roots; a double root is reported once; values map per root
    e = compile_expression("r := polyroots4(1, -3, 3, -3, 2); 10*r + 1")
    assert e.evaluate_all({}) == pytest.approx([11.0, 21.0])
    assert compile_expression("polyroots2(1, -2, 1)").evaluate_all({}) == pytest.approx([1.0])
    assert compile_expression("polyroots2(1, 0, 1)").evaluate_all({}) == []
    assert math.isnan(compile_expression("polyroots2(1, 0, 1)").evaluate({}))
    # a leading zero coefficient lowers the degree: 0*x^2 + 2x - 1
    assert compile_expression("polyroots2(0, 2, -1)").evaluate_all({}) == pytest.approx([0.5])
    # values from one root stay together: r - r is 0 for every root (not every pairing)
    assert compile_expression("r := polyroots2(1, -3, 2); r - r").evaluate_all({}) == [0.0, 0.0]
    # a root failing a domain check is dropped (sqrt of the negative root), the other survives
    assert compile_expression("sqrt(polyroots2(1, 0, -4))").evaluate_all({}) == pytest.approx([math.sqrt(2)])


# -- partial derivatives -------------------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("|JF1 0.3333 |P2 -1*cos(x)", {"JF1": "0.3333", "P2": "-1*cos(x)"}),
    ("", {}), ("   ", {}),
    ("|P1 0 |P2 0 |A 0", {"P1": "0", "P2": "0", "A": "0"}),
    ("|jfinger_L -1", {"jfinger_L": "-1"}),
    ("|J", {"J": "0"}),                     # OpenRAVE: a term without expression means 0
    ("|J1 2 * x\n|J2 3", {"J1": "2 * x", "J2": "3"}),
])
def test_parse_partials(text, expected):
    assert parse_partials(text) == expected


@pytest.mark.parametrize("text", ["0.333", "| |J 1"])
def test_parse_partials_rejects_malformed(text):
    with pytest.raises(ExpressionError):
        parse_partials(text)


# -- linear forms for URDF <mimic> ---------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("2*J+1", ("J", 2.0, 1.0)), ("J/3+0.87", ("J", 1 / 3, 0.87)), ("-(J)", ("J", -1.0, 0.0)),
    ("J", ("J", 1.0, 0.0)), ("-J", ("J", -1.0, 0.0)), ("0.5 - J*2", ("J", -2.0, 0.5)),
    ("(J + 1) * 3", ("J", 3.0, 3.0)), ("J*pi/180", ("J", math.pi / 180, 0.0)),
    ("2*(3*(J-1))", ("J", 6.0, -6.0)), ("a := 2*J; a + 1", ("J", 2.0, 1.0)), ("J*sqrt(4)", ("J", 2.0, 0.0)),
])
def test_as_linear(text, expected):
    var, mult, offset = compile_expression(text, ["J", "K"]).as_linear()
    assert var == expected[0]
    assert mult == pytest.approx(expected[1]) and offset == pytest.approx(expected[2])


@pytest.mark.parametrize("text", [
    "J*J", "sin(J)", "J+K", "1/J", "J-J", "3", "J^1", "abs(J)", "J*K - K*J",
    "r := polyroots2(1, 0, -J); r",
])
def test_as_linear_negative(text):
    assert compile_expression(text, ["J", "K"]).as_linear() is None


# -- errors --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, fragment", [
    ("JF1/3 + Q", "unknown variable 'Q' at position 8"),
    ("foo(J)", "unknown function 'foo' at position 0"),
    ("1 +", "expected a number, name or '(', found end of formula at position 3"),
    ("(1 + 2", "expected ')', found end of formula at position 6"),
    ("1 + 2)", "expected an operator, found ')' at position 5"),
    ("J J", "expected an operator, found 'J' at position 2"),
    ("sin 1", "function 'sin' needs '(' and arguments at position 0"),
    ("atan2(1)", "function 'atan2' takes 2 arguments, got 1 at position 7"),
    ("sin(1, 2)", "function 'sin' takes 1 argument, got 2"),
    ("2 @ 3", "unexpected character '@' at position 2"),
    ("x := 1", "expected ';', found end of formula"),
    ("x := 1;", "found end of formula at position 7"),
    ("", "found end of formula at position 0"),
    ("e", "unknown variable 'e'"),           # fparser has no constant e
])
def test_error_messages_name_the_problem_and_position(text, fragment):
    with pytest.raises(ExpressionError) as info:
        compile_expression(text, variables=["J", "JF1"])
    assert fragment in str(info.value)
    assert isinstance(info.value, DescriptionError)


def test_without_variable_list_every_name_is_free():
    e = compile_expression("a*b + c - pi")
    assert e.variables == {"a", "b", "c"}
    with pytest.raises(ExpressionError, match="no value for variable 'c'"):
        e.evaluate({"a": 1.0, "b": 2.0})


def test_variable_named_pi_wins_over_the_constant():
    assert compile_expression("pi*2", ["pi"]).evaluate({"pi": 1.0}) == 2.0


@pytest.mark.parametrize("text", [
    "(" * (MAX_DEPTH + 50) + "1" + ")" * (MAX_DEPTH + 50),
    "-" * 5000 + "1",
    "sin(" * 1000 + "1" + ")" * 1000,
    "2^" * 5000 + "1",
    "x<" * 5000 + "1",                   # a left-deep chain (a constant one would fold away)
    "a:=1;" * 10 + "x" + "|x" * 10000,
])
def test_absurd_nesting_is_an_expression_error(text):
    with pytest.raises(ExpressionError, match="nested"):
        compile_expression(text)


def test_reasonable_nesting_and_long_flat_formulas_work():
    assert value("(" * 150 + "1" + ")" * 150) == 1
    assert value("-(" * 90 + "1" + ")" * 90) == 1
    assert value("+".join(["1"] * 40000)) == 40000          # flat chains are not nested
    assert value("*".join(["1.0001"] * 1000)) == pytest.approx(1.0001 ** 1000)
    with pytest.raises(ExpressionError, match="limit"):
        compile_expression("1" + "+1" * MAX_LENGTH)


# -- property tests ------------------------------------------------------------------------------------
# Trees: ("num", v) ("var", name) ("neg", x) ("bin", op, a, b) ("call", fn, args)
_VARS = {"x": 0.7, "y": -1.3, "Jz_2": 2.5}
_FUNCS = {"sin": (1, math.sin), "cos": (1, math.cos), "atan": (1, math.atan), "sqrt": (1, math.sqrt),
          "exp": (1, math.exp), "log": (1, math.log), "abs": (1, abs), "atan2": (2, math.atan2),
          "min": (2, min), "max": (2, max)}
_PREC = {"+": 4, "-": 4, "*": 5, "/": 5}

leaves = st.one_of(
    st.tuples(st.just("num"), st.floats(0, 1e6, allow_nan=False) | st.sampled_from([0.0, 0.5, 2.0, 1e-5])),
    st.tuples(st.just("var"), st.sampled_from(sorted(_VARS))),
)


def _extend(children):
    return st.one_of(
        st.tuples(st.just("neg"), children),
        st.tuples(st.just("bin"), st.sampled_from(["+", "-", "*", "/", "^"]), children, children),
        st.sampled_from(sorted(_FUNCS)).flatmap(
            lambda f: st.tuples(st.just("call"), st.just(f), st.lists(children, min_size=_FUNCS[f][0],
                                                                      max_size=_FUNCS[f][0]))),
    )


trees = st.recursive(leaves, _extend, max_leaves=25)


def _print(tree) -> tuple[str, int]:
    """Text with only the parentheses the grammar needs; returns (text, precedence)."""
    kind = tree[0]
    if kind == "num":
        return repr(tree[1]), 8
    if kind == "var":
        return tree[1], 8
    if kind == "call":
        return f"{tree[1]}({', '.join(_print(a)[0] for a in tree[2])})", 8
    if kind == "neg":
        return "-" + _wrap(tree[1], 6), 6
    op, a, b = tree[1:]
    if op == "^":
        return _wrap(a, 8) + "^" + _wrap(b, 6), 7          # base is an atom; exponent may be unary
    return _wrap(a, _PREC[op]) + f" {op} " + _wrap(b, _PREC[op] + 1), _PREC[op]


def _wrap(tree, min_prec):
    text, prec = _print(tree)
    return text if prec >= min_prec else f"({text})"


def _reference(tree) -> float:
    kind = tree[0]
    if kind == "num":
        return tree[1]
    if kind == "var":
        return _VARS[tree[1]]
    if kind == "neg":
        return -_reference(tree[1])
    if kind == "call":
        fn = _FUNCS[tree[1]][1]
        try:
            return fn(*(_reference(a) for a in tree[2]))
        except OverflowError:                # exp
            return math.inf
    op, a, b = tree[1], _reference(tree[2]), _reference(tree[3])
    if op == "^":
        # C pow: (-a)^inf and (-inf)^b are defined (Python's float pow too: (-inf)^1.5 = inf)
        if a < 0 and math.isfinite(a) and math.isfinite(b) and not float(b).is_integer():
            raise ValueError("negative base, fractional exponent")
        try:
            result = a ** b
        except OverflowError:
            return -math.inf if a < 0 and b % 2 == 1 else math.inf
        return result
    return {"+": a + b, "-": a - b, "*": a * b}[op] if op != "/" else a / b


def _reference_value(tree) -> float:
    try:
        return float(_reference(tree))
    except (ValueError, ZeroDivisionError):
        return math.nan


@settings(max_examples=300, deadline=None)
@given(trees)
@example(("bin", "^", ("neg", ("call", "exp", [("num", 710.0)])), ("num", 1.5)))   # (-inf)^1.5 = inf, as C
def test_printed_trees_parse_back_to_the_same_value(tree):
    text = _print(tree)[0]
    expected = _reference_value(tree)
    got = compile_expression(text, variables=_VARS).evaluate(_VARS)
    if math.isnan(expected):
        assert math.isnan(got), text
    else:
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-300), text


_ALPHABET = list("0123456789.+-*/^%()<>=!&|,;: eExyJ_") + ["sin", "atan2", "polyroots2", ":=", "pi", "\n"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_ALPHABET), max_size=40).map("".join) | st.text(max_size=40))
def test_garbage_only_ever_raises_expression_error(text):
    try:
        e = compile_expression(text)
    except ExpressionError:
        return
    values = {name: 0.5 for name in e.variables}
    assert isinstance(e.evaluate(values), float)
    assert isinstance(e.as_linear(), (tuple, type(None)))
