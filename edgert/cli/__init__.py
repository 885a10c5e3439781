"""The ``edgert`` command line (names are binding: docs/design.md §5).

Each subcommand lives in its own private module with ``register(subparsers)``, which
adds its parser and sets ``func`` to a ``run(args) -> int``. Heavy imports happen inside
``run`` so ``edgert --help`` stays fast. Our own errors print one line and exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from edgert.errors import EdgeRTError

#: Subcommand modules, in ``--help`` order.
COMMANDS: tuple[str, ...] = (
    "edgert.cli._core",      # devices, models, run
    "edgert.cli._profile",
    "edgert.cli._simulate",
    "edgert.cli._cloud",
    "edgert.cli._deploy",
    "edgert.cli._bench",
)


def build_parser() -> argparse.ArgumentParser:
    """The full parser, every subcommand module registered."""
    parser = argparse.ArgumentParser(prog="edgert", description="On-device multi-DNN runtime for XR apps.")
    parser.add_argument("--profile", action="store_true",
                        help="profile the command with pyinstrument and print where the time went")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for mod in COMMANDS:
        importlib.import_module(mod).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``edgert`` command."""
    args = build_parser().parse_args(argv)
    profiler = None
    if args.profile:
        try:
            from pyinstrument import Profiler  # noqa: PLC0415
        except ImportError:
            print("edgert: error: --profile needs pyinstrument: pip install 'edgert[profile]'", file=sys.stderr)
            return 2
        profiler = Profiler()
        profiler.start()
    try:
        return int(args.func(args) or 0)
    except EdgeRTError as exc:
        print(f"edgert: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    finally:
        if profiler is not None:
            profiler.stop()
            print(profiler.output_text(unicode=True, color=False), file=sys.stderr)

