"""Verbs of the ``robot-bridge`` command, one module each.

A verb module ``robot_bridge/cli/verbs/<verb>.py`` exposes:

* ``HELP: str`` -- one line shown in ``robot-bridge --help``;
* ``add_arguments(parser: argparse.ArgumentParser) -> None``;
* ``main(args: argparse.Namespace) -> int`` -- the exit code.

List the verb in ``robot_bridge.cli.main.VERBS``. A verb may raise
``robot_bridge.errors.DescriptionError``: the command prints it on one line and exits 2.
"""
