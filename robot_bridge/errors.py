"""Typed errors for everything that reads robot descriptions.

Every error names where it happened: file, line (when lxml knows it) and an
element path, plus what was expected.  ``str(err)`` is one line, suitable for
``robot-bridge check`` and for node logs.
"""

from __future__ import annotations


class DescriptionError(Exception):
    """Base class: a robot description could not be read or is invalid."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 element: str | None = None):
        self.message = message
        self.file = str(file) if file is not None else None
        self.line = line
        self.element = element
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = []
        if self.file:
            where.append(self.file + (f":{self.line}" if self.line else ""))
        elif self.line:
            where.append(f"line {self.line}")
        if self.element:
            where.append(f"<{self.element}>" if "/" not in self.element else self.element)
        prefix = " ".join(where)
        return f"{prefix}: {self.message}" if prefix else self.message

    def with_location(self, *, file=None, line=None, element=None) -> "DescriptionError":
        """Fill in location fields that are still unknown (returns self)."""
        self.file = self.file or (str(file) if file is not None else None)
        self.line = self.line or line
        self.element = self.element or element
        self.args = (self.__str__(),)
        return self


class XMLSyntaxError(DescriptionError):
    """The file is not well-formed XML (or is binary / not UTF-8)."""


class UnsafeInputError(DescriptionError):
    """The input asks for something refused for safety: DTDs, entities, XInclude,
    paths escaping the allowed roots, zip bombs, files over a size limit (``formats/limits.py``)."""


class WorkBudgetError(UnsafeInputError):
    """A file asks its reader for more work than the reader's budget allows (elements processed, a node
    used again counted again): ``budget`` names the limit (e.g. ``MAX_MESH_WORK``), ``work`` is the
    work done when it was refused (never more than the limit)."""

    def __init__(self, message: str, *, budget: str = "", work: int = 0, **where):
        self.budget, self.work = budget, work
        super().__init__(message, **where)


class UnsupportedFormatError(DescriptionError):
    """No reader knows this file (suffix / root element)."""


class MissingFileError(DescriptionError):
    """A referenced file (include, mesh, sensor file) could not be found."""


class NotRegularFileError(MissingFileError):
    """The path exists but is a directory, device, FIFO or socket, not a regular file to read."""


class IncludeCycleError(DescriptionError):
    """A file includes itself, directly or through other files."""


class SchemaError(DescriptionError):
    """An element or attribute is missing, malformed or out of range."""


class SemanticMismatchError(DescriptionError):
    """An SRDF (or other semantic description) written for another robot."""


class UnknownReferenceError(DescriptionError):
    """A name refers to a link/joint/element that does not exist."""





class KinematicsError(DescriptionError):
    """The kinematic structure is invalid (loops, several roots, cycles in mimic joints)."""


class ExpressionError(DescriptionError):
    """A mimic formula could not be parsed or refers to unknown names/functions."""


class UnknownVariableError(ExpressionError):
    """A mimic formula names a variable (joint) the robot does not have: a broken reference, not a
    formula beyond the parser, so the load still fails on it."""


class NothingToPlanError(DescriptionError):
    """A robot without anything MoveIt could plan for (no group, manipulator or chain of driven joints)."""
