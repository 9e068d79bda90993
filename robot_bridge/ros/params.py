"""One parameter schema per node, in the spirit of generate_parameter_library.

A node lists its parameters once as :class:`Param` entries (name, default, description and the
constraints: range, choices, allowed array lengths, an extra rule, read-only when a change needs a
restart).  :class:`NodeParameters` declares them with full ``ParameterDescriptor``\\ s (what
``ros2 param describe`` shows), refuses a bad value with the reason -- at start-up (overrides, YAML)
and on ``ros2 param set`` alike -- and hands every accepted change to the node so it takes effect.

Strings that become frame ids, ROS names or paths say so (``string``) and are checked by one
validator (:func:`string_refusal`); path parameters that are ``confined`` may change at run time only to
files and folders under the roots trusted at launch (:func:`launch_roots`): a peer on the DDS domain
cannot widen what the readers trust (see docs/security.md, the trust model).

The schema part (:class:`Param`, :func:`refusal`) imports no rclpy; only the adapter does.
"""

from __future__ import annotations

import math
import os
import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional


@dataclass(frozen=True)
class EmptyArray:
    """Default of an array parameter declared without a value (its element type: string, double, integer)."""

    element: str

    @property
    def name(self) -> str:          # as rclpy's Parameter.Type: STRING_ARRAY, DOUBLE_ARRAY, INTEGER_ARRAY
        return f"{self.element.upper()}_ARRAY"


STRING_ARRAY = EmptyArray("string")
DOUBLE_ARRAY = EmptyArray("double")
INTEGER_ARRAY = EmptyArray("integer")


@dataclass(frozen=True)
class Param:
    """One parameter: ``default`` is its value, or an :class:`EmptyArray` for an array without one."""

    name: str
    default: Any
    description: str
    range: Optional[tuple[float, float]] = None       # inclusive (low, high) of an int or double
    choices: Optional[tuple] = None                   # allowed values (strings: exactly these)
    lengths: Optional[tuple[int, ...]] = None         # allowed array lengths
    rule: Optional[Callable[[Any], Optional[str]]] = None   # extra check: the reason to refuse, or None
    rule_text: str = ""                               # the rule in words, shown in the descriptor
    read_only: bool = False                           # a change needs a restart: refused at run time
    any_type: bool = False                            # dynamic typing (YAML reads an unquoted off as false)
    normalize: Optional[Callable[[Any], Any]] = None  # value as the choices/rule see it (any_type)
    string: str = ""                                  # "frame", "name" or "text": see string_refusal
    confined: bool = False                            # a path kept under the launch-time roots at run time

    def __iter__(self) -> Iterator:
        """(name, default, description): unpacks like the former schema tuples."""
        return iter((self.name, self.default, self.description))

    @property
    def is_double(self) -> bool:
        """A double or double array: an integer given for it is taken as that number."""
        if isinstance(self.default, EmptyArray):
            return self.default.element == "double"
        values = self.default if isinstance(self.default, (list, tuple)) else [self.default]
        return bool(values) and all(isinstance(v, float) for v in values)

    @property
    def is_array(self) -> bool:
        return isinstance(self.default, (EmptyArray, list, tuple)) or hasattr(self.default, "name")

    def constraints(self) -> str:
        """The constraints in words (``ParameterDescriptor.additional_constraints``)."""
        parts = []
        if self.choices is not None:
            parts.append("one of: " + ", ".join(repr(c) if c == "" else str(c) for c in self.choices))
        if self.lengths is not None:
            parts.append("length " + " or ".join(map(str, self.lengths)))
        if self.range is not None and isinstance(self.default, list):
            parts.append(f"each value in [{self.range[0]}, {self.range[1]}]")
        if self.string:
            parts.append(STRING_RULES[self.string])
        if self.confined:
            parts.append(CONFINED_TEXT)
        if self.rule_text:
            parts.append(self.rule_text)
        if self.read_only:
            parts.append("read-only (set at start-up)")
        return "; ".join(parts)

    def refusal(self, value) -> Optional[str]:
        """Why ``value`` is not acceptable, or None (types and scalar ranges are also rclpy's check)."""
        if self.normalize is not None:
            value = self.normalize(value)
        if value is None:           # an array without a value
            return None
        if self.choices is not None and value not in self.choices:
            return f"{self.name}={value!r} is not one of: {', '.join(map(repr, self.choices))}"
        if self.lengths is not None and len(value) not in self.lengths:
            return (f"{self.name} has {len(value)} values; expected "
                    f"{' or '.join(map(str, self.lengths))}")
        if self.range is not None:
            low, high = self.range
            for v in (value if isinstance(value, (list, tuple)) else [value]):
                if isinstance(v, (int, float)) and not isinstance(v, bool) and \
                        (not math.isfinite(v) or not low <= v <= high):
                    return f"{self.name}={v!r} is outside [{low}, {high}]"
        if self.string:
            reason = string_refusal(value, self.string)
            if reason:
                return f"{self.name}={shown(value)}: {reason}"
        if self.rule is not None:
            reason = self.rule(value)
            if reason:
                return f"{self.name}={value!r}: {reason}"
        return None


def schema(*params: Param | tuple) -> tuple[Param, ...]:
    """The schema of a node; a bare (name, default, description) tuple is a Param without constraints."""
    return tuple(p if isinstance(p, Param) else Param(*p) for p in params)


def positive(text: str = "> 0") -> Callable[[Any], Optional[str]]:
    return lambda v: None if v > 0 else f"must be {text}"


# -- strings that become frame ids, names and paths --------------------------------------------------

STRING_RULES = {
    "frame": "tf2 frame id: no whitespace or control characters, no leading '/'",
    "prefix": ("tf2 frame id prefix: ROS name tokens [A-Za-z_][A-Za-z0-9_]* separated by '/' (ASCII, no "
               "'..', no leading '/', a trailing '/' or '_' allowed)"),
    "name": "ROS name: no whitespace or control characters",
    "text": "no control characters",
}
XACRO_ARGS_TEXT = ("Arguments of a .xacro description_file: 'name:=value other:=value' as on the xacro "
                   "command line")
CONFINED_TEXT = "at run time only under the folders trusted at launch"


def shown(value, limit: int = 200) -> str:
    """``repr(value)`` clipped: a reason quotes what a peer sent, not all of it."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


_PREFIX = re.compile(r"(?:[A-Za-z_][A-Za-z0-9_]*/)*(?:[A-Za-z_][A-Za-z0-9_]*)?")


def string_refusal(value, kind: str) -> Optional[str]:
    """Why ``value`` (a string, or each of an array) cannot be a ``kind`` string, or None.

    Every kind refuses control characters (NUL cuts a C string short: ``'a b\\x00c'`` arrived as
    ``'a b'``; newlines and escapes forge log lines).  Frame ids and names also refuse whitespace (ROS
    names are letters, digits, ``_``, ``/``, ``~``; tf2 frame ids follow them by convention) and frame
    ids a leading ``/`` (tf2 refuses such ids in every lookup).  Other printable characters (``-``,
    ``.``) stay allowed: frames named after a file's links use them.
    """
    for text in (value if isinstance(value, (list, tuple)) else [value]):
        if not isinstance(text, str):
            continue
        control = next((i for i, char in enumerate(text) if unicodedata.category(char) == "Cc"), None)
        if control is not None:
            return f"control character {text[control]!r} at index {control}; expected a {STRING_RULES[kind]}"
        space = next((i for i, char in enumerate(text) if char.isspace()), None) if kind != "text" else None
        if space is not None:
            return f"whitespace {text[space]!r} at index {space}; expected a {STRING_RULES[kind]}"
        if kind in ("frame", "prefix") and text.startswith("/"):
            return f"leading '/' in {shown(text)}; expected a {STRING_RULES[kind]}"
        if kind == "prefix" and not _PREFIX.fullmatch(text):
            bad = next((i for i, char in enumerate(text) if not (char.isascii() and (char.isalnum() or
                                                                                      char in "_/"))), None)
            what = f"character {text[bad]!r} at index {bad}" if bad is not None else \
                "a name token starting with a digit, or an empty one ('//')"
            return f"{what} in {shown(text)}; expected a {STRING_RULES[kind]}"
    return None


def launch_roots(files: Iterable[str] = (), folders: Iterable[str] = ()):
    """The folders trusted at launch for run-time changes of ``confined`` parameters (and, in
    :func:`confined_refusal`, the share folder of every package of the ament index, as ``package://``
    resolves): :func:`robot_bridge.formats.paths.launch_roots`."""
    from ..formats.paths import launch_roots as roots

    return roots(files, folders)


def confined_refusal(name: str, value, roots) -> Optional[str]:
    """Why a run-time ``value`` of a confined path parameter leaves ``roots`` (an AllowedRoots), or None.
    An empty value (no file) is always allowed."""
    from ..formats.paths import in_package_share

    for path in (value if isinstance(value, (list, tuple)) else [value]):
        if not path or roots.contains(path) or in_package_share(path):     # an installed package's share
            continue
        real = os.path.realpath(os.path.expanduser(path))
        real = real if len(real) <= 200 else real[:200] + "..."
        trusted = ", ".join(map(str, roots.roots[:6])) + (", ..." if len(roots.roots) > 6 else "") or "none"
        return (f"{name}: {shown(path)} resolves to {real}, outside the folders trusted at launch "
                f"({trusted}); a run-time change may only name files and folders under them (set it at "
                f"launch, or launch with a search_path holding it)")
    return None


# -- rclpy adapter ---------------------------------------------------------------------------------

def descriptor(param: Param, name: str | None = None):
    """The ParameterDescriptor ``ros2 param describe`` shows for ``param``."""
    from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor

    d = ParameterDescriptor(name=name or param.name, description=param.description,
                            additional_constraints=param.constraints(), read_only=param.read_only,
                            dynamic_typing=param.any_type)
    if param.range is not None and not param.is_array:
        low, high = param.range
        if isinstance(param.default, bool):
            pass
        elif isinstance(param.default, int):
            d.integer_range = [IntegerRange(from_value=int(low), to_value=int(high), step=0)]
        elif isinstance(param.default, float):
            d.floating_point_range = [FloatingPointRange(from_value=float(low), to_value=float(high),
                                                         step=0.0)]
    return d


def _declared_default(param: Param):
    from rclpy.parameter import Parameter

    default = param.default
    if isinstance(default, EmptyArray):
        return Parameter.Type[default.name]
    return default


class NodeParameters:
    """A node's parameters from its schema: declared, validated on every set, changes handed on.

    ``validate(changes)`` (optional) returns a reason to refuse a set the schema accepts (e.g. a file that
    does not load); ``apply(changes)`` (optional) runs after an accepted set so it takes effect.  Both get
    ``{name: value}`` of the parameters set, and are not called while parameters are being declared.
    ``roots(get)`` (needed with ``confined`` parameters) returns the AllowedRoots trusted at launch, from
    the declared values (``get(name)``); a run-time value of a confined parameter outside them is refused.
    """

    def __init__(self, node, params: Iterable[Param] = (), *,
                 validate: Callable[[dict], Optional[str]] | None = None,
                 apply: Callable[[dict], None] | None = None,
                 roots: Callable[[Callable[[str], Any]], Any] | None = None):
        self.node = node
        self.specs: dict[str, Param] = {}
        self.validate, self.apply = validate, apply
        self._declaring = False
        self.roots = None
        node.add_pre_set_parameters_callback(self._integers_as_doubles)
        node.add_on_set_parameters_callback(self._on_set)
        node.add_post_set_parameters_callback(self._on_post_set)
        self.declare(params)
        if roots is not None:
            self.roots = roots(self.get)

    def declare(self, params: Iterable[Param], prefix: str = "") -> dict:
        """Declare ``params`` (names prefixed with ``prefix``); their values.  A bad start-up value
        raises rclpy's InvalidParameterValueException with the reason."""
        values = {}
        for param in params:
            full = prefix + param.name
            self.specs[full] = param
            given = getattr(self.node, "_parameter_overrides", {}).get(full)
            if given is not None and param.is_double:       # 50 (a YAML/CLI integer) where a double is meant
                as_double = as_doubles(given.value)
                if as_double is not None:
                    self.node._parameter_overrides[full] = type(given)(full, value=as_double)
            self._declaring = True
            try:
                self.node.declare_parameter(full, _declared_default(param), descriptor(param, full))
            finally:
                self._declaring = False
            values[param.name] = self.get(full)
        return values

    def _integers_as_doubles(self, parameters):
        """Before a set (``ros2 param set x 50``): an integer for a double parameter becomes that double."""
        from rclpy.parameter import Parameter

        out = []
        for parameter in parameters:
            spec = self.specs.get(parameter.name)
            as_double = as_doubles(parameter.value) if spec is not None and spec.is_double else None
            out.append(Parameter(parameter.name, value=as_double) if as_double is not None else parameter)
        return out

    def hold(self, name: str, value) -> None:
        """Set a read-only parameter to what the node found (e.g. the joints read from the robot), so
        ``ros2 param get`` shows the value in use."""
        from rclpy.parameter import Parameter

        spec = self.specs.get(name)
        if isinstance(value, (list, tuple)) and not value and spec is not None \
                and isinstance(spec.default, EmptyArray):       # [] has no type of its own
            parameter = Parameter(name, Parameter.Type[spec.default.name], [])
        else:
            parameter = Parameter(name, value=value)
        self._declaring = True
        try:
            self.node._set_parameters_atomically_common([parameter],
                                                        {name: self.node.describe_parameter(name)})
        finally:
            self._declaring = False

    def get(self, name: str):
        """The value; an array declared without a value is ``[]``."""
        from rclpy.exceptions import ParameterUninitializedException

        try:
            value = self.node.get_parameter(name).value
        except ParameterUninitializedException:
            value = None
        if value is None and self.specs.get(name) is not None and self.specs[name].is_array:
            return []
        return value

    def __getitem__(self, name: str):
        return self.get(name)

    def _on_set(self, parameters):
        from rcl_interfaces.msg import SetParametersResult

        changes = {p.name: p.value for p in parameters}
        for name, value in changes.items():
            spec = self.specs.get(name)
            reason = spec.refusal(value) if spec is not None else None
            if not reason and spec is not None and spec.confined and not self._declaring:
                reason = confined_refusal(name, value, self.roots) if self.roots is not None else \
                    f"{name}: no folders trusted at launch; set it at launch"
            if reason:
                return SetParametersResult(successful=False, reason=reason)
        if self.validate is not None and not self._declaring:
            reason = self.validate(changes)
            if reason:
                return SetParametersResult(successful=False, reason=reason)
        return SetParametersResult(successful=True)

    def _on_post_set(self, parameters) -> None:
        if self.apply is not None and not self._declaring:
            self.apply({p.name: p.value for p in parameters})


def as_doubles(value):
    """``value`` with integers as floats (an int, or a list of ints and floats), or None if it is not one."""
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, (list, tuple)) and value and \
            all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value) and \
            any(isinstance(v, int) for v in value):
        return [float(v) for v in value]
    return None


def values(params: Iterable[Param]) -> Mapping[str, Any]:
    """name -> default of a schema (arrays without a value: ``[]``)."""
    return {p.name: [] if isinstance(p.default, EmptyArray) else p.default for p in params}


def _markdown_value(param: Param) -> str:
    if isinstance(param.default, EmptyArray) or hasattr(param.default, "name"):
        return "`[]`"
    if isinstance(param.default, bool):
        return f"`{str(param.default).lower()}`"
    return f"`{param.default!r}`" if isinstance(param.default, str) else f"`{param.default}`"


def markdown_table(params: Iterable[Param], prefix: str = "") -> str:
    """The markdown table of a schema (the node pages in docs/:
    :mod:`robot_bridge.nodes.parameter_tables`)."""
    rows = ["| name | default | constraints | meaning |", "|---|---|---|---|"]
    for p in params:
        limits = [f"[{p.range[0]}, {p.range[1]}]"] if p.range is not None and not p.is_array else []
        text = "; ".join(limits + ([p.constraints()] if p.constraints() else []))
        rows.append(f"| `{prefix}{p.name}` | {_markdown_value(p)} | {text.replace('|', '/')} | "
                    f"{p.description.replace('|', '/')} |")
    return "\n".join(rows)


def update_tables(text: str, tables: Mapping[str, str]) -> str:
    """``text`` with each ``<!-- parameters: KEY -->`` ... ``<!-- /parameters -->`` block set to
    ``tables[KEY]`` (the nodes' tables: :mod:`robot_bridge.nodes.parameter_tables`; this module knows
    no node)."""
    import re

    return re.sub(r"(<!-- parameters: (\S+) -->\n).*?(<!-- /parameters -->)",
                  lambda m: f"{m.group(1)}{tables[m.group(2)]}\n{m.group(3)}", text, flags=re.S)
