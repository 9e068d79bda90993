"""``robot-bridge <verb> ...``: builds argparse subcommands from the verb modules that exist."""

from __future__ import annotations

import argparse
import importlib
import sys
from types import ModuleType

from .. import __version__
from ..errors import DescriptionError

PROG = "robot-bridge"
VERBS = ("inspect", "check", "convert", "moveit-config", "render", "run", "view")
VERB_PACKAGE = "robot_bridge.cli.verbs"
EXIT_INPUT_ERROR = 2


def load_verbs(names=None) -> dict[str, ModuleType]:
    """Import each listed verb module; a verb whose module does not exist (yet) is skipped."""
    verbs = {}
    for name in VERBS if names is None else names:
        module_name = f"{VERB_PACKAGE}.{name.replace('-', '_')}"
        try:
            verbs[name] = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            if err.name != module_name:  # the verb exists but one of its imports is missing
                raise
    return verbs


def build_parser(verbs: dict[str, ModuleType]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Read, check, convert and run robot descriptions (OpenRAVE XML, COLLADA, "
                               "URDF/SRDF).")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    for name, module in verbs.items():
        verb_parser = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(verb_parser)
        verb_parser.set_defaults(_verb_main=module.main)
    return parser


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def main(argv=None) -> int:
    try:
        verbs = load_verbs()
        if not verbs:
            print(f"{PROG}: no verbs installed", file=sys.stderr)
            return 1
        args = build_parser(verbs).parse_args(argv)
        if args.verb in ("run", "view"):    # from here a Ctrl-C is a recorded stop request (cli/stop.py)
            from .stop import record_stop_requests

            previous = record_stop_requests()
        else:
            previous = {}
        try:
            return int(args._verb_main(args) or 0)
        except (DescriptionError, OSError) as err:
            print(f"{PROG} {args.verb}: error: {_one_line(err)}", file=sys.stderr)
            return EXIT_INPUT_ERROR
        finally:
            import signal

            for sig, handler in previous.items():
                signal.signal(sig, handler)
    except KeyboardInterrupt:           # Ctrl-C before the verb took over: quietly, as a shell expects
        return 130


if __name__ == "__main__":
    sys.exit(main())
