"""TEST DOUBLE: a minimal stand-in for the ``launch`` and ``launch_ros`` packages.

Neither is on PyPI, so ``launch/bridge.launch.py`` cannot run here with the real ones.  This module
provides just the names the launch file imports, with the same constructor signatures, records what
they are given, and "executes" a LaunchDescription the way ``ros2 launch`` would for these actions:
declared arguments take their defaults unless given on the command line, environment variables are
set, OpaqueFunctions are called with the context and their returned actions collected.

Used only by ``test/launch/test_bridge_launch.py``; never import it from the package.
"""

from __future__ import annotations

import sys
import types
from contextlib import contextmanager


class LaunchContext:
    def __init__(self, arguments: dict[str, str]):
        self.launch_configurations = dict(arguments)
        self.environment: dict[str, str] = {}


class LaunchDescription:
    def __init__(self, initial_entities=None):
        self.entities = list(initial_entities or [])


class DeclareLaunchArgument:
    def __init__(self, name, *, default_value=None, description="", choices=None):
        self.name, self.default_value = name, default_value
        self.description, self.choices = description, choices


class SetEnvironmentVariable:
    def __init__(self, name, value):
        self.name, self.value = name, value


class OpaqueFunction:
    def __init__(self, *, function, args=None, kwargs=None):
        self.function, self.args, self.kwargs = function, list(args or []), dict(kwargs or {})


class LaunchConfiguration:
    def __init__(self, variable_name, *, default=None):
        self.variable_name, self.default = variable_name, default

    def perform(self, context: LaunchContext) -> str:
        if self.variable_name in context.launch_configurations:
            return context.launch_configurations[self.variable_name]
        if self.default is None:
            raise KeyError(f"launch configuration {self.variable_name!r} does not exist")
        return self.default


class Node:
    """launch_ros.actions.Node: only the keyword arguments are kept."""

    def __init__(self, *, executable, package=None, name=None, namespace=None, parameters=None,
                 remappings=None, arguments=None, output="log", **other):
        self.kwargs = dict(executable=executable, package=package, name=name, namespace=namespace,
                           parameters=parameters, remappings=remappings, arguments=arguments, output=output,
                           **other)


def execute(description: LaunchDescription, arguments: dict[str, str]) -> tuple[LaunchContext, list]:
    """Visit the entities in order as ros2 launch does; returns the context and the resulting actions."""
    declared = {e.name for e in description.entities if isinstance(e, DeclareLaunchArgument)}
    unknown = set(arguments) - declared
    if unknown:
        raise ValueError(f"arguments not declared by the launch file: {sorted(unknown)}")
    context = LaunchContext(arguments)
    actions: list = []
    pending = list(description.entities)
    while pending:
        entity = pending.pop(0)
        if isinstance(entity, DeclareLaunchArgument):
            if entity.name not in context.launch_configurations:
                if entity.default_value is None:
                    raise ValueError(f"required launch argument {entity.name!r} not given")
                context.launch_configurations[entity.name] = entity.default_value
        elif isinstance(entity, SetEnvironmentVariable):
            context.environment[entity.name] = entity.value
        elif isinstance(entity, OpaqueFunction):
            pending = list(entity.function(context, *entity.args, **entity.kwargs) or []) + pending
        else:
            actions.append(entity)
    return context, actions


@contextmanager
def installed():
    """Make ``launch``, ``launch.actions``, ``launch.substitutions``, ``launch_ros`` and
    ``launch_ros.actions`` importable as this stand-in, restoring sys.modules afterwards."""
    names = {
        "launch": {"LaunchDescription": LaunchDescription, "LaunchContext": LaunchContext},
        "launch.actions": {"DeclareLaunchArgument": DeclareLaunchArgument, "OpaqueFunction": OpaqueFunction,
                           "SetEnvironmentVariable": SetEnvironmentVariable},
        "launch.substitutions": {"LaunchConfiguration": LaunchConfiguration},
        "launch_ros": {},
        "launch_ros.actions": {"Node": Node},
    }
    saved = {name: sys.modules.get(name) for name in names}
    try:
        for name, attributes in names.items():
            module = types.ModuleType(name, "test double (test/launch/fake_launch_modules.py)")
            module.__dict__.update(attributes)
            sys.modules[name] = module
        sys.modules["launch"].actions = sys.modules["launch.actions"]
        sys.modules["launch"].substitutions = sys.modules["launch.substitutions"]
        sys.modules["launch_ros"].actions = sys.modules["launch_ros.actions"]
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
