"""The ``edgert`` command line (names are binding: docs/design.md §5).

Each subcommand lives in its own private module with ``register(subparsers)``, which
adds its parser and sets ``func`` to a ``run(args) -> int``. Heavy imports happen inside
``run`` so ``edgert --help`` stays fast.

:func:`main` is the one boundary of the command line: a usage error (argparse, or any
:class:`~edgert.errors.EdgeRTError`) prints one line and exits 2; an OS error (a file that
cannot be written) one line and exits 2; anything else is a bug of ours: one line naming
it, exit 1. None prints a traceback unless ``--debug`` or ``EDGERT_DEBUG=1`` asks for one.

Quiet by default: what LiteRT / ONNX Runtime print from C++ goes through
:class:`delegates._native_log.NativeLogRouter` into the ``edgert.native`` logger,
shown from WARNING up; ``edgert -v COMMAND`` shows their INFO lines too.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import logging
import os
import re
import sys
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import NoReturn

from edgert.errors import ConfigError, EdgeRTError

#: Subcommand modules, in ``--help`` order.
COMMANDS: tuple[str, ...] = (
    "edgert.cli._core",      # devices, models, run
    "edgert.cli._profile",
    "edgert.cli._simulate",
    "edgert.cli._sweep",
    "edgert.cli._cloud",
    "edgert.cli._deploy",
    "edgert.cli._bench",
)


class UsageError(ConfigError):
    """A command-line usage error; ``prog`` is the (sub)command it belongs to."""

    def __init__(self, prog: str, message: str) -> None:
        super().__init__(message)
        self.prog = prog


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line at :func:`main`, not a usage dump."""

    def error(self, message: str) -> NoReturn:
        """Raise UsageError: ``--load must be > 0 …`` and where help is (argparse would print usage)."""
        message = re.sub(r"^argument ([^:]+): (must|is|cannot)\b", r"\1 \2", message)
        message = re.sub(r"^argument ([^:]+): ", r"\1: ", message)
        raise UsageError(self.prog, f"{message} (see `{self.prog} --help`)")


def build_parser() -> argparse.ArgumentParser:
    """The full parser, every subcommand module registered."""
    parser = Parser(prog="edgert", description="On-device multi-DNN runtime for XR apps.")
    parser.add_argument("--debug", action="store_true",
                        help="print the traceback of an error (also: EDGERT_DEBUG=1)")
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
    from delegates._native_log import NativeLogRouter  # noqa: PLC0415

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


def debug_enabled(argv: Sequence[str] | None = None) -> bool:
    """True when ``--debug`` is given or ``EDGERT_DEBUG`` is set to anything but ``""``/``0``."""
    args = sys.argv[1:] if argv is None else argv
    return "--debug" in args or os.environ.get("EDGERT_DEBUG", "") not in ("", "0")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``edgert`` command: 0 ok, 2 usage error, 1 a bug (see the module doc)."""
    debug = debug_enabled(argv)
    try:
        args = build_parser().parse_args(argv)
    except ConfigError as exc:
        return report(exc, debug)
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
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:   # `edgert … | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as exc:  # noqa: BLE001 - the boundary: every error ends here as one line
        return report(exc, debug)
    finally:
        if profiler is not None:
            profiler.stop()
            print(profiler.output_text(unicode=True, color=False), file=sys.stderr)


def report(exc: BaseException, debug: bool) -> int:
    """Print ``exc`` as one line (with its traceback first when ``debug``); returns the exit code."""
    if debug:
        traceback.print_exception(exc, file=sys.stderr)
    if isinstance(exc, EdgeRTError):
        print(f"{getattr(exc, 'prog', 'edgert')}: error: {_one_line(str(exc))}", file=sys.stderr)
        return 2
    if isinstance(exc, OSError):
        where = f" {exc.filename!r}" if exc.filename else ""
        print(f"edgert: error: cannot use{where}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    if isinstance(exc, MemoryError):
        print("edgert: error: out of memory; use smaller inputs", file=sys.stderr)
        return 1
    hint = "" if debug else " (rerun with --debug or EDGERT_DEBUG=1 for the traceback)"
    print(f"edgert: internal error: {type(exc).__name__}: {_one_line(str(exc))}; please report it{hint}",
          file=sys.stderr)
    return 1


def _one_line(text: str) -> str:
    return " ".join(text.split())
