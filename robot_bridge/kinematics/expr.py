"""Mimic formulas in OpenRAVE's fparser syntax: parse once, evaluate fast.

Syntax (fparser 4 as embedded in OpenRAVE), lowest to highest precedence::

    a | b      a & b      a = b  a != b  a < b  a <= b  a > b  a >= b
    a + b  a - b          a * b  a / b  a % b       -a  !a  +a        a ^ b

``^`` is right-associative and binds tighter than unary minus (``-2^2 = -4``,
``2^-1 = 0.5``).  Statements ``name := expr;`` define temporaries used by the
final expression.  Functions: the fparser built-ins plus OpenRAVE's
``polyroots2``..``polyroots8``, ``SSSA``, ``SASA``, ``SASS`` and ``INRANGE``.  ``pi`` is a
constant (a variable of that name wins); fparser has no ``e`` constant.

Variables are joint names.  OpenRAVE textually replaces joint names before
parsing, so names with ``-`` or ``.`` work there; here, when ``variables`` is
given, the longest known name starting at an identifier position is taken.

Evaluation semantics: a math domain error anywhere (``asin(2)``, ``log(-1)``,
``sqrt(-1)``, ``x/0``, ``0^-1``, ``(-8)^(1/3)``) makes fparser report an eval
error; here the result is NaN.  Overflow gives +-inf as in C.  Comparisons use
fparser's epsilon (1e-12) and truth means ``|x| >= 0.5``.

Multi-valued results follow OpenRAVE's ``EvalMulti`` (fparsermulti.h):
``polyrootsN(c_N, ..., c_0)`` (highest power first) yields every real root;
each root becomes a separate value that flows through the rest of the formula
(values from the same root stay together), values hitting a domain error are
dropped, and the formula yields the list that remains
(:meth:`Expression.evaluate_all`).
"""

from __future__ import annotations

import math
import operator
import re
from itertools import product
from typing import Callable, Iterable, Mapping, Optional

import numpy as np

from ..errors import ExpressionError, UnknownVariableError

MAX_LENGTH = 100_000
MAX_DEPTH = 200
EPSILON = 1e-12          # fparser's default comparison epsilon for double
_LIMIT_TOLERANCE = 1e-12
_NAN = float("nan")
_INF = float("inf")

# -- tokenizer -------------------------------------------------------------------------------------
_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<name>[^\W\d][\w.]*)
  | (?P<op>:=|<=|>=|!=|[-+*/^%(),;=<>&|!])
""", re.VERBOSE)


class _Tok:
    __slots__ = ("kind", "text", "pos")

    def __init__(self, kind: str, text: str, pos: int):
        self.kind, self.text, self.pos = kind, text, pos

    def __repr__(self):
        return f"{self.kind}:{self.text!r}@{self.pos}"


def _tokenize(text: str, known: tuple[str, ...]) -> list[_Tok]:
    """Split ``text``; ``known`` are variable names (longest first) that may hold
    characters identifiers cannot."""
    tokens = []
    pos, n = 0, len(text)
    while pos < n:
        name = _known_name_at(text, pos, known) if known else None
        if name is not None:
            tokens.append(_Tok("name", name, pos))
            pos += len(name)
            continue
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ExpressionError(f"unexpected character {text[pos]!r} at position {pos} in {_clip(text)!r}")
        kind = m.lastgroup
        if kind != "ws":
            tokens.append(_Tok(kind, m.group(), pos))
        pos = m.end()
    tokens.append(_Tok("end", "", n))
    return tokens


def _known_name_at(text: str, pos: int, known: tuple[str, ...]) -> Optional[str]:
    """The longest name of ``known`` starting at ``pos`` and ending at a name boundary."""
    def name_char(i: int) -> bool:
        return 0 <= i < len(text) and (text[i].isalnum() or text[i] in "_.")

    if name_char(pos - 1):
        return None
    for name in known:
        if text.startswith(name, pos) and not name_char(pos + len(name)):
            return name
    return None


def _clip(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


# -- functions -------------------------------------------------------------------------------------
def _truth(x: float) -> bool:
    return abs(x) >= 0.5


def _exp(x):
    try:
        return math.exp(x)
    except OverflowError:
        return _INF


def _pow(x, y):
    try:
        return math.pow(x, y)
    except OverflowError:
        return -_INF if x < 0 and float(y).is_integer() and int(y) % 2 else _INF


def _hyper(fn):
    def wrapped(x):
        try:
            return fn(x)
        except OverflowError:
            return math.copysign(_INF, x) if fn is math.sinh else _INF
    return wrapped


def _rounding(fn, x):
    return float(fn(x)) if math.isfinite(x) else x


def _fp_int(x):          # fparser int(): round half away from zero
    return _rounding(math.floor, x + 0.5) if x >= 0 else _rounding(math.ceil, x - 0.5)


# The triangle family as OpenRAVE registers it with its joint function parser (src/libopenrave/
# kinbodyjoint.cpp: fparser_sssa / fparser_sasa / fparser_sass, CreateJointFunctionParser); CATIA
# exports name them in MathML <csymbol encoding="text/xml"> functions.
def _sssa(a, b, c):      # angle opposite side a from the three sides (OpenRAVE)
    f = (a * a + b * b - c * c) / (2 * b)
    return math.atan2(math.sqrt(a * a - f * f), b - f)


def _sasa(a, gamma, b):  # missing angle from two sides and the included angle
    return math.atan2(a * math.sin(gamma), b - a * math.cos(gamma))


def _sass(a, gamma, b):  # missing side from two sides and the included angle
    return math.sqrt(a * a + b * b - 2 * a * b * math.cos(gamma))


def _inrange(x, lo, hi):
    # CATIA's INRANGE(x, lo, hi): OpenRAVE's COLLADA reader (src/libopenrave-core/colladaparser/
    # colladareader.cpp, _ExtractMathML, csymbol functions) writes it as "((x>=lo)&(x<=hi))" in fparser
    # syntax, so the comparisons carry fparser's epsilon and the result is 1 or 0.
    return _BINARY["&"](_BINARY[">="](x, lo), _BINARY["<="](x, hi))


_ROOT_TOL = math.sqrt(np.finfo(float).eps)


def polyroots(*coeffs: float) -> list[float]:
    """Real roots of ``coeffs[0]*x^n + ... + coeffs[n]``, as OpenRAVE's
    ``polyroots<n>`` (mathextra.h): roots within 8*sqrt(eps) of each other are
    merged by averaging (a multiple root), and a root counts as real when its
    imaginary part is below sqrt(eps).  numpy.roots (companion-matrix
    eigenvalues) replaces OpenRAVE's Durand-Kerner iteration.  Returned in
    ascending order (OpenRAVE's order is the iteration's, i.e. unspecified)."""
    c = np.asarray(coeffs, dtype=float)
    if not np.all(np.isfinite(c)):
        return []
    roots = np.roots(c)          # strips leading zeros: a lower degree polynomial
    used = np.zeros(len(roots), dtype=bool)
    real = []
    for i, r in enumerate(roots):
        if used[i]:
            continue
        near = np.abs(roots - r) < 8 * _ROOT_TOL
        near &= ~used
        used |= near
        mean = roots[near].mean()
        if abs(mean.imag) < _ROOT_TOL:
            real.append(float(mean.real))
    return sorted(real)


# name -> (arity, fn); fn takes floats, returns float; may raise ValueError/ZeroDivisionError
_FUNCTIONS: dict[str, tuple[int, Callable]] = {
    "abs": (1, abs), "acos": (1, math.acos), "acosh": (1, math.acosh), "asin": (1, math.asin),
    "asinh": (1, math.asinh), "atan": (1, math.atan), "atan2": (2, math.atan2),
    "atanh": (1, math.atanh), "cbrt": (1, lambda x: float(np.cbrt(x))),
    "ceil": (1, lambda x: _rounding(math.ceil, x)),
    "cos": (1, math.cos), "cosh": (1, _hyper(math.cosh)),
    "cot": (1, lambda x: 1.0 / math.tan(x)), "csc": (1, lambda x: 1.0 / math.sin(x)),
    "exp": (1, _exp), "exp2": (1, lambda x: _pow(2.0, x)), "floor": (1, lambda x: _rounding(math.floor, x)),
    "hypot": (2, math.hypot), "int": (1, _fp_int), "log": (1, math.log), "log2": (1, math.log2),
    "log10": (1, math.log10), "max": (2, max), "min": (2, min), "pow": (2, _pow),
    "sec": (1, lambda x: 1.0 / math.cos(x)), "sin": (1, math.sin), "sinh": (1, _hyper(math.sinh)),
    "sqrt": (1, math.sqrt), "tan": (1, math.tan), "tanh": (1, math.tanh),
    "trunc": (1, lambda x: _rounding(math.trunc, x)),
    "SSSA": (3, _sssa), "SASA": (3, _sasa), "SASS": (3, _sass), "INRANGE": (3, _inrange),
}
_MULTI_FUNCTIONS = {f"polyroots{d}": d + 1 for d in range(2, 9)}   # name -> arity
_CONSTANTS = {"pi": math.pi}

_BINARY = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "%": math.fmod, "^": _pow,
    "=": lambda a, b: float(abs(a - b) <= EPSILON), "!=": lambda a, b: float(abs(a - b) > EPSILON),
    "<": lambda a, b: float(a < b - EPSILON), "<=": lambda a, b: float(a <= b + EPSILON),
    ">": lambda a, b: float(b < a - EPSILON), ">=": lambda a, b: float(b <= a + EPSILON),
    "&": lambda a, b: float(_truth(a) and _truth(b)), "|": lambda a, b: float(_truth(a) or _truth(b)),
}
_UNARY = {"-": operator.neg, "+": lambda x: x, "!": lambda x: float(not _truth(x))}
_MATH_ERRORS = (ValueError, ZeroDivisionError, OverflowError)

# -- AST -------------------------------------------------------------------------------------------
# Nodes are tuples: ("num", value) ("var", name) ("un", op, x) ("bin", op, a, b)
# ("sum", [(op, x), ...]) ("prod", [(op, x), ...])   (op of the first item is "+" / "*")
# ("call", name, [args]) ("mcall", name, [args])     (mcall: multi-valued)


def _children(node) -> list:
    kind = node[0]
    if kind == "un":
        return [node[2]]
    if kind == "bin":
        return [node[2], node[3]]
    if kind in ("sum", "prod"):
        return [x for _, x in node[1]]
    if kind in ("call", "mcall"):
        return node[2]
    return []


def _tree_depth(root) -> int:
    """Depth of the tree, computed without recursion."""
    deepest = 0
    stack = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in _children(node))
    return deepest


_PRECEDENCE = {"|": 1, "&": 2, "=": 3, "!=": 3, "<": 3, "<=": 3, ">": 3, ">=": 3,
               "+": 4, "-": 4, "*": 5, "/": 5, "%": 5}


class _Parser:
    def __init__(self, text: str, variables: Optional[frozenset]):
        self.text = text
        self.variables = variables
        known = _special_names(variables) if variables else ()
        self.toks = _tokenize(text, known)
        self.i = 0
        self.depth = 0               # open parentheses, calls, prefix operators and exponents
        self.temporaries: set[str] = set()
        self.used: set[str] = set()
        self.multi = False

    def peek(self) -> _Tok:
        return self.toks[self.i]

    def take(self) -> _Tok:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def at_op(self, text: str) -> bool:
        tok = self.toks[self.i]
        return tok.kind == "op" and tok.text == text

    def error(self, message: str, tok: Optional[_Tok] = None) -> ExpressionError:
        tok = tok or self.peek()
        return ExpressionError(f"{message} at position {tok.pos} in {_clip(self.text)!r}")

    def expect(self, text: str) -> _Tok:
        if not self.at_op(text):
            raise self.error(f"expected {text!r}, found {_describe(self.peek())}")
        return self.take()

    def enter(self):
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(f"formula nested deeper than {MAX_DEPTH} levels")

    def program(self):
        statements = []
        while self.peek().kind == "name" and self.toks[self.i + 1].text == ":=":
            name = self.take().text
            self.take()
            value = self.expression()
            self.expect(";")
            self.temporaries.add(name)
            statements.append((name, value))
        result = self.expression()
        if self.peek().kind != "end":
            raise self.error(f"expected an operator, found {_describe(self.peek())}")
        return statements, result

    def expression(self, min_prec: int = 1):
        """Binary operators by precedence climbing (left-associative)."""
        left = self.operand()
        while True:
            tok = self.peek()
            prec = _PRECEDENCE.get(tok.text) if tok.kind == "op" else None
            if prec is None or prec < min_prec:
                break
            self.take()
            left = _binary(tok.text, left, self.expression(prec + 1))
        return left

    def operand(self):
        """Prefix operators, an atom, then ``^`` (binds tighter than the prefixes)."""
        depth = self.depth
        self.enter()
        prefixes = []
        while self.peek().kind == "op" and self.peek().text in _UNARY:
            self.enter()
            prefixes.append(self.take().text)
        node = self.atom()
        if self.at_op("^"):
            self.take()
            node = _fold(("bin", "^", node, self.operand()))     # right-associative, 2^-1 allowed
        for op in reversed(prefixes):
            node = _fold(("un", op, node))
        self.depth = depth
        return node

    def atom(self):
        tok = self.take()
        if tok.kind == "num":
            return ("num", float(tok.text))
        if tok.kind == "op" and tok.text == "(":
            inner = self.expression()
            self.expect(")")
            return inner
        if tok.kind == "name":
            return self.call(tok) if self.at_op("(") else self.name(tok)
        raise self.error(f"expected a number, name or '(', found {_describe(tok)}", tok)

    def name(self, tok: _Tok):
        name = tok.text
        if name in self.temporaries:
            return ("var", name)
        if self.variables is not None and name in self.variables:
            self.used.add(name)
            return ("var", name)
        if name in _CONSTANTS:
            return ("num", _CONSTANTS[name])
        if name in _FUNCTIONS or name in _MULTI_FUNCTIONS or name == "if":
            raise self.error(f"function {name!r} needs '(' and arguments", tok)
        if self.variables is not None:
            err = self.error(f"unknown variable {name!r}", tok)
            raise UnknownVariableError(err.message) from None
        self.used.add(name)
        return ("var", name)

    def call(self, tok: _Tok):
        name = tok.text
        if name in _FUNCTIONS:
            arity = _FUNCTIONS[name][0]
        elif name in _MULTI_FUNCTIONS:
            arity = _MULTI_FUNCTIONS[name]
        elif name == "if":
            arity = 3
        else:
            raise self.error(f"unknown function {name!r}", tok)
        self.take()                             # "("
        args = []
        if not self.at_op(")"):
            args.append(self.expression())
            while self.at_op(","):
                self.take()
                args.append(self.expression())
        close = self.expect(")")
        if len(args) != arity:
            raise self.error(f"function {name!r} takes {arity} argument{'s' * (arity != 1)}, "
                             f"got {len(args)}", close)
        if name in _MULTI_FUNCTIONS:
            self.multi = True
            return ("mcall", name, args)
        return _fold(("call", name, args))


def _describe(tok: _Tok) -> str:
    return "end of formula" if tok.kind == "end" else repr(tok.text)


def _binary(op: str, left, right):
    """A binary node; + - and * / chains become one flat node evaluated left to right."""
    kind = "sum" if op in "+-" else "prod" if op in "*/" else None
    if kind is None:
        return _fold(("bin", op, left, right))
    if left[0] == kind:          # not all-constant (it would have folded), so stays unfolded
        left[1].append((op, right))
        return left
    return _fold((kind, [("+" if kind == "sum" else "*", left), (op, right)]))


def _is_plain_name(name: str) -> bool:
    m = _TOKEN.fullmatch(name)
    return m is not None and m.lastgroup == "name"


_SPECIAL_NAMES: list = []      # (set of variables, its special names): the last few sets, newest last


def _special_names(variables: frozenset) -> tuple[str, ...]:
    """Variables the tokenizer must match whole (not plain names), longest first; once per set of
    variables, not per formula (a robot's formulas share one set: per formula it was quadratic).
    The sets are told apart by identity: an ``lru_cache`` compared an equal set built by another
    caller element by element (O(joints) per formula again); each set kept here stays alive, so its
    id is not reused."""
    for known, names in reversed(_SPECIAL_NAMES):
        if known is variables:
            return names
    names = tuple(sorted((v for v in variables if not _is_plain_name(v)), key=len, reverse=True))
    _SPECIAL_NAMES.append((variables, names))
    del _SPECIAL_NAMES[:-8]
    return names


def _fold(node):
    """Evaluate a node whose operands are all numbers (keeps it on a math error)."""
    kind = node[0]
    try:
        if kind == "un" and node[2][0] == "num":
            return ("num", float(_UNARY[node[1]](node[2][1])))
        if kind == "bin" and node[2][0] == "num" and node[3][0] == "num":
            return ("num", float(_BINARY[node[1]](node[2][1], node[3][1])))
        if kind == "call" and all(a[0] == "num" for a in node[2]):
            if node[1] == "if":
                return node[2][1] if _truth(node[2][0][1]) else node[2][2]
            return ("num", float(_FUNCTIONS[node[1]][1](*(a[1] for a in node[2]))))
        if kind in ("sum", "prod") and all(x[0] == "num" for _, x in node[1]):
            value = node[1][0][1][1]
            for op, x in node[1][1:]:
                value = _BINARY[op](value, x[1])
            return ("num", float(value))
    except _MATH_ERRORS:
        pass
    return node


# -- scalar compiler: nested closures over a mapping name -> float ----------------------------------
def _compile(node) -> Callable[[Mapping[str, float]], float]:
    kind = node[0]
    if kind == "num":
        value = node[1]
        return lambda env: value
    if kind == "var":
        name = node[1]
        return lambda env: env[name]
    if kind == "un":
        x = _compile(node[2])
        if node[1] == "-":
            return lambda env: -x(env)
        if node[1] == "+":
            return x
        return lambda env: 1.0 if abs(x(env)) < 0.5 else 0.0
    if kind == "bin":
        return _compile_binary(_BINARY[node[1]], node[2], node[3])
    if kind in ("sum", "prod"):
        items = node[1]
        if len(items) == 2:
            return _compile_binary(_BINARY[items[1][0]], items[0][1], items[1][1])
        first = _compile(items[0][1])
        rest = [(_BINARY[op], _compile(x)) for op, x in items[1:]]

        def chain(env):
            value = first(env)
            for op, f in rest:
                value = op(value, f(env))
            return value
        return chain
    if kind == "call":
        name, args = node[1], node[2]
        if name == "if":
            cond, then, other = (_compile(a) for a in args)
            return lambda env: then(env) if abs(cond(env)) >= 0.5 else other(env)
        fn = _FUNCTIONS[name][1]
        if len(args) == 1:
            a = args[0]
            if a[0] == "var":
                var = a[1]
                return lambda env: fn(env[var])
            fa = _compile(a)
            return lambda env: fn(fa(env))
        if len(args) == 2:
            return _compile_binary(fn, args[0], args[1])
        fs = [_compile(a) for a in args]
        return lambda env: fn(*[f(env) for f in fs])
    raise AssertionError(f"multi-valued node in scalar compile: {kind}")


def _compile_binary(op, a, b):
    """``op(a, b)`` specialised on variable / constant operands (the common mimic shapes)."""
    ka, kb = a[0], b[0]
    if ka == "var" and kb == "num":
        name, c = a[1], b[1]
        return lambda env: op(env[name], c)
    if ka == "num" and kb == "var":
        c, name = a[1], b[1]
        return lambda env: op(c, env[name])
    if ka == "var" and kb == "var":
        n1, n2 = a[1], b[1]
        return lambda env: op(env[n1], env[n2])
    fa = _compile(a)
    if kb == "num":
        c = b[1]
        return lambda env: op(fa(env), c)
    if kb == "var":
        name = b[1]
        return lambda env: op(fa(env), env[name])
    fb = _compile(b)
    if ka == "num":
        c = a[1]
        return lambda env: op(c, fb(env))
    return lambda env: op(fa(env), fb(env))


# -- multi-valued compiler (fparsermulti.h semantics) ----------------------------------------------
# A value is a list of (float, thread); thread -1 = not from a multi-valued call.  Values
# combine only when their threads agree (or one is -1); a failing combination is dropped.
def _combine(fn, lists):
    out = []
    for combo in product(*lists):
        thread = -1
        ok = True
        for _, t in combo:
            if t != -1:
                if thread != -1 and t != thread:
                    ok = False
                    break
                thread = t
        if not ok:
            continue
        try:
            out.append((float(fn(*(v for v, _ in combo))), thread))
        except _MATH_ERRORS:
            pass
    return out


def _compile_multi(node):
    kind = node[0]
    if kind == "num":
        value = [(node[1], -1)]
        return lambda env, st: value
    if kind == "var":
        name = node[1]
        return lambda env, st: env[name]
    if kind == "un":
        fn = _UNARY[node[1]]
        x = _compile_multi(node[2])
        return lambda env, st: _combine(fn, [x(env, st)])
    if kind == "bin":
        fn = _BINARY[node[1]]
        a, b = _compile_multi(node[2]), _compile_multi(node[3])
        return lambda env, st: _combine(fn, [a(env, st), b(env, st)])
    if kind in ("sum", "prod"):
        items = node[1]
        first = _compile_multi(items[0][1])
        rest = [(_BINARY[op], _compile_multi(x)) for op, x in items[1:]]

        def chain(env, st):
            value = first(env, st)
            for op, f in rest:
                value = _combine(op, [value, f(env, st)])
            return value
        return chain
    if kind == "call":
        name = node[1]
        fs = [_compile_multi(a) for a in node[2]]
        fn = (lambda c, a, b: a if abs(c) >= 0.5 else b) if name == "if" else _FUNCTIONS[name][1]
        return lambda env, st: _combine(fn, [f(env, st) for f in fs])
    if kind == "mcall":
        fs = [_compile_multi(a) for a in node[2]]

        def call(env, st):
            out = []
            for combo in product(*(f(env, st) for f in fs)):
                threads = {t for _, t in combo if t != -1}
                if len(threads) > 1:
                    continue
                for root in polyroots(*(v for v, _ in combo)):
                    st[0] += 1
                    out.append((root, st[0]))
            return out
        return call
    raise AssertionError(kind)


# -- linear form -----------------------------------------------------------------------------------
def _linear(node, temps):
    """(var or None, multiplier, offset) when ``node`` is affine in at most one variable."""
    kind = node[0]
    if kind == "num":
        return (None, 0.0, node[1])
    if kind == "var":
        if node[1] in temps:
            return temps[node[1]]
        return (node[1], 1.0, 0.0)
    if kind == "un" and node[1] in "+-":
        x = _linear(node[2], temps)
        if x is None:
            return None
        return x if node[1] == "+" else (x[0], -x[1], -x[2])
    if kind in ("sum", "prod"):
        items = node[1]
        acc = _linear(items[0][1], temps)
        for op, x in items[1:]:
            other = _linear(x, temps)
            if acc is None or other is None:
                return None
            acc = _linear_op(op, acc, other)
        return acc
    return None


def _linear_op(op, a, b):
    va, ma, ca = a
    vb, mb, cb = b
    if op in "+-":
        if va is not None and vb is not None and va != vb:
            return None
        sign = 1.0 if op == "+" else -1.0
        return (va or vb, ma + sign * mb, ca + sign * cb)
    if op == "*":
        if va is not None and vb is not None:
            return None
        if vb is None:
            return (va, ma * cb, ca * cb)
        return (vb, mb * ca, cb * ca)
    if op == "/":
        if vb is not None or cb == 0:
            return None
        return (va, ma / cb, ca / cb)
    return None


# -- public API ------------------------------------------------------------------------------------
class Expression:
    """A compiled formula.  ``evaluate(values)`` maps variable name -> float."""

    __slots__ = ("source", "variables", "_statements", "_result", "_fn", "_multi_fn", "is_multi")

    def __init__(self, source, variables, statements, result, multi):
        self.source: str = source
        self.variables: frozenset[str] = variables
        self._statements = statements
        self._result = result
        self.is_multi: bool = multi
        self._fn = None if multi else _compile_program(statements, result)
        self._multi_fn = _compile_program_multi(statements, result) if multi else None

    def evaluate(self, values: Mapping[str, float]) -> float:
        """The formula's value (NaN on a math domain error).  For a multi-valued
        formula, the first of :meth:`evaluate_all` (smallest root first), NaN if none."""
        if self._fn is None:
            results = self.evaluate_all(values)
            return results[0] if results else _NAN
        try:
            return float(self._fn(values))
        except _MATH_ERRORS:
            return _NAN
        except KeyError as exc:
            raise self._missing(exc) from None

    def evaluate_all(self, values: Mapping[str, float]) -> list[float]:
        """Every value of the formula (one for an ordinary formula unless it fails)."""
        if self._multi_fn is None:
            v = self.evaluate(values)
            return [] if math.isnan(v) else [v]
        try:
            return [v for v, _ in self._multi_fn(values)]
        except KeyError as exc:
            raise self._missing(exc) from None

    def evaluate_within(self, values: Mapping[str, float], lower: float, upper: float,
                        circular: bool = False) -> float:
        """The value OpenRAVE gives a mimic DOF with limits [lower, upper]
        (KinBody::SetDOFValues): the first candidate inside the limits (one within
        1e-12 outside is clamped); if none is, the first candidate clamped to the
        limits.  A circular DOF takes the first candidate.  NaN if there is none."""
        candidates = self.evaluate_all(values)
        if not candidates:
            return _NAN
        if not circular:
            for v in candidates:
                if lower - _LIMIT_TOLERANCE <= v <= upper + _LIMIT_TOLERANCE:
                    return min(max(v, lower), upper)
            return min(max(candidates[0], lower), upper)
        return candidates[0]

    def _missing(self, exc: KeyError) -> ExpressionError:
        return ExpressionError(f"no value for variable {exc.args[0]!r} in {_clip(self.source)!r}")

    def as_linear(self) -> Optional[tuple[str, float, float]]:
        """``(var, multiplier, offset)`` when the formula is exactly
        ``multiplier * var + offset`` (multiplier != 0), else None."""
        temps: dict[str, object] = {}
        for name, node in self._statements:
            temps[name] = _linear(node, temps) if not _has_multi(node) else None
        form = _linear(self._result, temps)
        if form is None or form[0] is None or form[1] == 0:
            return None
        return (form[0], float(form[1]), float(form[2]) + 0.0)   # + 0.0: no -0.0

    def __repr__(self):
        return f"Expression({_clip(self.source)!r})"


def _has_multi(node) -> bool:
    kind = node[0]
    if kind == "mcall":
        return True
    if kind in ("num", "var"):
        return False
    if kind == "un":
        return _has_multi(node[2])
    if kind == "bin":
        return _has_multi(node[2]) or _has_multi(node[3])
    if kind in ("sum", "prod"):
        return any(_has_multi(x) for _, x in node[1])
    return any(_has_multi(a) for a in node[2])


def _compile_program(statements, result):
    fn = _compile(result)
    if not statements:
        return fn
    steps = [(name, _compile(node)) for name, node in statements]

    def run(values):
        env = dict(values)
        for name, f in steps:
            env[name] = f(env)
        return fn(env)
    return run


def _compile_program_multi(statements, result):
    fn = _compile_multi(result)
    steps = [(name, _compile_multi(node)) for name, node in statements]

    def run(values):
        env = {k: [(float(v), -1)] for k, v in values.items()}
        state = [0]
        for name, f in steps:
            env[name] = f(env, state)
        return fn(env, state)
    return run


def compile_expression(text: str, variables: Optional[Iterable[str]] = None) -> Expression:
    """Parse an fparser formula once.  With ``variables``, any other name is an error."""
    if not isinstance(text, str):
        raise ExpressionError(f"formula must be a string, got {type(text).__name__}")
    if len(text) > MAX_LENGTH:
        raise ExpressionError(f"formula is {len(text)} characters long (limit {MAX_LENGTH})")
    # a frozenset is used as it is: a robot's formulas share one (copying it per formula was O(joints) each,
    # quadratic over a robot with mimics along its chains)
    known = variables if isinstance(variables, frozenset) or variables is None else frozenset(variables)
    try:
        parser = _Parser(text, known)
        statements, result = parser.program()
        for node in [result] + [node for _, node in statements]:
            if _tree_depth(node) > MAX_DEPTH:
                raise ExpressionError(f"formula nested deeper than {MAX_DEPTH} levels: {_clip(text)!r}")
        return Expression(text, frozenset(parser.used), statements, result, parser.multi)
    except RecursionError:
        raise ExpressionError(f"formula nested too deeply: {_clip(text)!r}") from None


def parse_partials(text: str) -> dict[str, str]:
    """OpenRAVE ``mimic_vel`` / ``mimic_accel``: ``|J1 expr |J2 expr`` -> {var: expr}.

    As OpenRAVE: a term without an expression means ``0``; text before the first
    ``|`` is ignored; a repeated variable keeps the last term.
    """
    result: dict[str, str] = {}
    if not text or "|" not in text:
        if text and text.strip():
            raise ExpressionError(f"partial derivatives must look like '|J expr |K expr', "
                                  f"got {_clip(text)!r}")
        return result
    for term in text.split("|")[1:]:
        parts = term.split(None, 1)
        if not parts:
            raise ExpressionError(f"empty '|' term in partial derivatives {_clip(text)!r}")
        result[parts[0]] = parts[1].strip() if len(parts) > 1 else "0"
    return result
