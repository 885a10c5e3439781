"""The ``edgert`` command line (names are binding: docs/design.md §5).

Each subcommand lives in its own private module with ``register(subparsers)``, which
adds its parser and sets ``func`` to a ``run(args) -> int``. Heavy imports happen inside
``run`` so ``edgert --help`` stays fast. Our own errors print one line and exit 2.

Quiet by default: what LiteRT / ONNX Runtime print from C++ goes through
:class:`delegates._native.NativeLogRouter` into the ``edgert.native`` logger,
shown from WARNING up; ``edgert -v COMMAND`` shows their INFO lines too.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

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
    parser.add_argument("-v", "--verbose", dest="log_verbose", action="count", default=0,
                        help="show native LiteRT / ONNX Runtime log lines (INFO) and debug lines; "
                             "default: warnings only")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for mod in COMMANDS:
        importlib.import_module(mod).register(sub)
    return parser


@contextmanager
def quiet_native_logs(verbose: int) -> Iterator[None]:
    """Route native libraries' stderr lines into logging for the block (INFO shown when ``verbose``)."""
    from delegates._native import NativeLogRouter  # noqa: PLC0415

    log = logging.getLogger("edgert")
    router = NativeLogRouter(logging.getLogger("edgert.native")).start()
    handler = logging.StreamHandler(router.stream)
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    log.addHandler(handler)
    old_level, old_propagate = log.level, log.propagate
    log.setLevel(logging.DEBUG if verbose > 1 else logging.INFO if verbose else logging.WARNING)
    log.propagate = False
    try:
        yield
    finally:
        # Native objects left in reference cycles (LiteRT's CompiledModel environment after a probe) log
        # their teardown when collected: collect them while the router still listens, not at exit.
        gc.collect()
        router.stop()   # drains the pipe through the handler first
        log.removeHandler(handler)
        log.setLevel(old_level)
        log.propagate = old_propagate


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
        with quiet_native_logs(args.log_verbose):
            return int(args.func(args) or 0)
    except EdgeRTError as exc:
        print(f"edgert: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:   # `edgert … | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    finally:
        if profiler is not None:
            profiler.stop()
            print(profiler.output_text(unicode=True, color=False), file=sys.stderr)
