"""Content MathML (COLLADA ``<formula>``) -> fparser text for the expression engine.

``<csymbol encoding="COLLADA">kmodel1/joint3</csymbol>`` is a joint value; the
caller's ``symbol`` callback turns it into a variable name.  Output is fully
parenthesised so operator precedence never depends on the target syntax.
"""

from __future__ import annotations

import math
from typing import Callable, Optional

from ...errors import ExpressionError

_FUNCTIONS = {"sin": "sin", "cos": "cos", "tan": "tan", "sec": "sec", "csc": "csc", "cot": "cot",
              "arcsin": "asin", "arccos": "acos", "arctan": "atan", "sinh": "sinh", "cosh": "cosh",
              "tanh": "tanh", "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh", "exp": "exp",
              "ln": "log", "abs": "abs", "floor": "floor", "ceiling": "ceil"}
_NARY = {"plus": "+", "times": "*", "and": "&", "or": "|"}
_BINARY = {"divide": "/", "power": "^", "rem": "%", "eq": "=", "neq": "!=", "gt": ">", "lt": "<",
           "geq": ">=", "leq": "<="}
_CONSTANTS = {"pi": repr(math.pi), "exponentiale": repr(math.e), "true": "1", "false": "0"}
# Functions named by <csymbol encoding="text/xml"> that OpenRAVE's COLLADA reader knows
# (src/libopenrave-core/colladaparser/colladareader.cpp, _ExtractMathML): the name is the ``name`` of
# the <formula> its ``definitionURL`` points at (CATIA's library_formulas), else, with
# type="function", the csymbol's text.  INRANGE is compiled by the expression engine
# (kinematics/expr.py), SSSA/SASA/SASS as OpenRAVE registers them with fparser.
CSYMBOL_FUNCTIONS = {"INRANGE": 3, "SSSA": 3, "SASA": 3, "SASS": 3, "atan2": 2}


class MathMLConverter:
    def __init__(self, symbol: Callable[[str, object], str], warn: Callable[[str], None],
                 file: Optional[str] = None, definition: Optional[Callable[[str, object], object]] = None):
        self.symbol = symbol
        self.warn = warn
        self.file = file
        self.definition = definition      # definitionURL -> the element it names (None: not found)

    def _error(self, message: str, el) -> ExpressionError:
        return ExpressionError(message, file=self.file, line=getattr(el, "sourceline", None),
                               element="math")

    def convert(self, math_el) -> str:
        """fparser text of a ``<math>`` element (or any content element)."""
        if math_el.tag == "math":
            children = [c for c in math_el if isinstance(c.tag, str)]
            if len(children) != 1:
                raise self._error(f"<math> must hold one expression, found {len(children)}", math_el)
            math_el = children[0]
        return self._expr(math_el)

    def _expr(self, el) -> str:
        tag = el.tag
        if tag == "cn":
            return self._number(el)
        if tag == "ci":
            return self.symbol((el.text or "").strip(), el)
        if tag == "csymbol":
            return self.symbol((el.text or "").strip(), el)
        if tag in _CONSTANTS:
            return _CONSTANTS[tag]
        if tag == "apply":
            return self._apply(el)
        if tag == "semantics":
            first = next((c for c in el if isinstance(c.tag, str)), None)
            if first is not None:
                return self._expr(first)
        raise self._error(f"unsupported MathML element <{tag}>", el)

    def _number(self, el) -> str:
        parts = [(el.text or "").strip()] + [(s.tail or "").strip() for s in el if s.tag == "sep"]
        kind = el.get("type", "real")
        try:
            if kind == "e-notation" and len(parts) == 2:
                value = float(parts[0]) * 10.0 ** float(parts[1])
            elif kind == "rational" and len(parts) == 2:
                value = float(parts[0]) / float(parts[1])
            else:
                value = float(parts[0])
        except (ValueError, ZeroDivisionError):
            raise self._error(f"bad <cn> number {parts!r}", el) from None
        text = repr(value)
        return f"({text})" if value < 0 else text

    def _apply(self, el) -> str:
        children = [c for c in el if isinstance(c.tag, str)]
        if not children:
            raise self._error("empty <apply>", el)
        op, args = children[0], children[1:]
        qualifiers = {a.tag: a for a in args if a.tag in ("degree", "logbase")}
        args = [a for a in args if a.tag not in ("degree", "logbase")]
        name = op.tag
        values = [self._expr(a) for a in args]
        if name == "csymbol":
            fn = self._function_name(op)
            if fn not in CSYMBOL_FUNCTIONS:
                # OpenRAVE substitutes 1; here the formula is refused and its joint made independent
                raise self._error(f"function {fn!r} (MathML <csymbol>) is not implemented", op)
            if len(values) != CSYMBOL_FUNCTIONS[fn]:
                raise self._error(f"function {fn!r} takes {CSYMBOL_FUNCTIONS[fn]} arguments, got "
                                  f"{len(values)}", op)
            return f"{fn}({', '.join(values)})"
        if name in _NARY:
            if name == "plus" and len(values) == 1:
                return values[0]
            return "(" + f" {_NARY[name]} ".join(values) + ")"
        if name == "minus":
            if len(values) == 1:
                return f"(-{values[0]})"
            if len(values) == 2:
                return f"({values[0]} - {values[1]})"
        elif name in _BINARY and len(values) == 2:
            return f"({values[0]} {_BINARY[name]} {values[1]})"
        elif name == "not" and len(values) == 1:
            return f"(!{values[0]})"
        elif name in _FUNCTIONS and len(values) == 1:
            return f"{_FUNCTIONS[name]}({values[0]})"
        elif name == "root" and len(values) == 1:
            if "degree" in qualifiers:
                return f"({values[0]} ^ (1 / {self._degree(qualifiers['degree'])}))"
            return f"sqrt({values[0]})"
        elif name == "log" and len(values) == 1:
            if "logbase" in qualifiers:
                return f"(log({values[0]}) / log({self._degree(qualifiers['logbase'])}))"
            return f"log10({values[0]})"
        elif name in ("min", "max") and values:
            out = values[0]
            for v in values[1:]:
                out = f"{name}({out}, {v})"
            return out
        elif name == "quotient" and len(values) == 2:
            return f"int({values[0]} / {values[1]})"
        raise self._error(f"unsupported MathML operator <{name}> with {len(values)} argument(s)", op)

    def _function_name(self, op) -> str:
        url = (op.get("definitionURL") or "").strip()
        if url and self.definition is not None:
            target = self.definition(url, op)
            if target is not None:
                return (target.get("name") or (op.text or "").strip() or target.get("id") or url).strip()
        return (op.text or "").strip() or url

    def _degree(self, el) -> str:
        inner = next((c for c in el if isinstance(c.tag, str)), None)
        if inner is None:
            raise self._error(f"empty <{el.tag}>", el)
        return self._expr(inner)
