"""``edgert deploy android|jetson|linux``: profile models on a target device and write a device profile.

Wired into ``edgert/cli/`` with ``register(sub)``. The flags of docs/design.md §5
are binding; the extra ones (``--bundle``, ``--trtexec``, ``--wheel``,
``--venv``, ``--service``, ``--with-edgert``, ``--wheelhouse``, ``--ssh-config`` …) are optional and documented in docs/deploy.md.
Errors print one line on stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from edgert.errors import EdgeRTError


def register(subparsers: Any) -> None:
    """Add ``deploy android``, ``deploy jetson`` and ``deploy linux`` to the main parser's subparsers."""
    p = subparsers.add_parser("deploy", help="profile models on an Android device, a Jetson or a Linux board, "
                                             "write a device profile",
                              description="Profile models on a target device and write a device profile (docs/design.md §6).")
    p.set_defaults(func=_missing_target, _deploy_parser=p)
    targets = p.add_subparsers(dest="target", metavar="{android,jetson,linux}")

    a = targets.add_parser("android", help="adb + TensorFlow Lite benchmark_model on every processor path",
                           description="Check the device over adb, push benchmark_model and the models to "
                                       "/data/local/tmp/edgert/, run it once per processor path (CPU/XNNPACK, GPU, "
                                       "NNAPI, Hexagon/QNN when present) and write a device profile.")
    a.add_argument("--serial", required=True, help="the device serial, as `adb devices` lists it")
    a.add_argument("--benchmark-binary", required=True, metavar="PATH",
                   help="TensorFlow Lite's benchmark_model for the device's ABI; libhexagon_*.so / libQnn*.so beside "
                        "it are pushed too")
    a.add_argument("--models", nargs="+", required=True, metavar="M.tflite", help=".tflite models to profile")
    a.add_argument("-o", "--output", required=True, metavar="profile.json", help="device profile to write")
    a.add_argument("--dry-run", action="store_true", help="print every command, run none, write nothing")
    a.add_argument("--bundle", metavar="PATH", help="also push this file or directory to /data/local/tmp/edgert/bundle/")
    a.set_defaults(func=run)

    j = targets.add_parser("jetson", help="ssh/scp + trtexec on the GPU and DLA cores",
                           description="Read the L4T release over ssh, copy a bundle (wheel, models, config) to "
                                       "~/edgert, profile each model with trtexec on the GPU and DLA cores 0/1 and "
                                       "write a device profile.")
    _ssh_target_flags(j, "user@host", "M.onnx", ".onnx models to profile")
    j.add_argument("--trtexec", default=None, metavar="PATH",
                   help="trtexec on the Jetson (default /usr/src/tensorrt/bin/trtexec)")
    j.add_argument("--wheel", metavar="PATH", help="edgert wheel to ship (default: build one from this source tree)")
    j.add_argument("--venv", action="store_true", help="create ~/edgert/venv on the Jetson and install the wheel")
    j.add_argument("--service", metavar="CMD",
                   help="install and start a systemd unit running CMD from the venv (implies --venv; needs sudo -n)")
    j.add_argument("--with-edgert", action="store_true",
                   help="also install edgert in ~/edgert/venv and profile the models with edgert itself "
                        "(`edgert profile` on the Jetson), beside trtexec's numbers")
    _board_flags(j, ssh_config=False)
    j.set_defaults(func=run)

    x = targets.add_parser("linux", help="ssh/scp + edgert's own profile on any Linux board",
                           description="Read the board's facts over ssh, copy an edgert wheel and the models to "
                                       "~/edgert, install edgert in ~/edgert/venv, run `edgert devices --json` and "
                                       "`edgert profile` there on every path the board has, and bring the profile "
                                       "home.")
    _ssh_target_flags(x, "user@host[:port]", "M", ".tflite / .onnx models to profile")
    x.add_argument("--wheel", metavar="PATH", help="edgert wheel to ship (default: build one from this source tree)")
    _board_flags(x, ssh_config=True)
    x.set_defaults(func=run)


def _ssh_target_flags(p: argparse.ArgumentParser, host_metavar: str, models_metavar: str, models_help: str) -> None:
    """The binding flags of a target reached over ssh (jetson, linux): --host, --models, -o, --dry-run."""
    p.add_argument("--host", required=True, metavar=host_metavar, help="ssh destination (key authentication)")
    p.add_argument("--models", nargs="+", required=True, metavar=models_metavar, help=models_help)
    p.add_argument("-o", "--output", required=True, metavar="profile.json", help="device profile to write")
    p.add_argument("--dry-run", action="store_true", help="print every command, run none, write nothing")


def _board_flags(p: argparse.ArgumentParser, ssh_config: bool) -> None:
    """The flags of a deployment that installs edgert on the board (linux; jetson --with-edgert)."""
    p.add_argument("--wheelhouse", metavar="DIR",
                   help="ship the wheels in DIR too and install from them only (a board without network for pip)")
    p.add_argument("--constraint", metavar="FILE",
                   help="a pip constraints file shipped with the bundle (pip install -c), e.g. to pin a version")
    p.add_argument("--extras", default="", metavar="NAME[,NAME…]",
                   help="edgert extras to try on the board (e.g. qnn); one the board cannot take is recorded")
    p.add_argument("--python", default="python3", metavar="PATH", help="the board's Python 3.11+ (default python3)")
    p.add_argument("--runs", type=int, default=20, help="timed runs per model and path on the board (default 20)")
    p.add_argument("--warmup", type=int, default=3, help="untimed warm-up runs (default 3)")
    p.add_argument("--delegates", default="", metavar="NAME[,NAME…]",
                   help="paths to profile on the board (default: every path the board has)")
    if ssh_config:
        p.add_argument("--ssh-config", metavar="FILE", help="ssh config for ssh/scp -F (default ~/.ssh/config)")


def _missing_target(args: argparse.Namespace) -> int:
    print("edgert deploy: say where: `edgert deploy android ...`, `edgert deploy jetson ...` or "
          "`edgert deploy linux ...`", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    """Run ``deploy android``, ``jetson`` or ``linux``; 0 when a profile was written (or planned), 2 on error."""
    from edgert.deploy.android import deploy_android
    from edgert.deploy.jetson import DEFAULT_TRTEXEC, deploy_jetson
    from edgert.deploy.linux import deploy_linux

    try:
        if args.target == "android":
            result = deploy_android(args.serial, args.benchmark_binary, args.models, args.output,
                                    dry_run=args.dry_run, bundle=args.bundle)
        elif args.target == "linux":
            result = deploy_linux(args.host, args.models, args.output, dry_run=args.dry_run,
                                  options=_linux_options(args))
        else:
            result = deploy_jetson(args.host, args.models, args.output, dry_run=args.dry_run,
                                   trtexec=args.trtexec or DEFAULT_TRTEXEC, wheel=args.wheel,
                                   venv=args.venv, service=args.service,
                                   with_edgert=_linux_options(args) if args.with_edgert else None)
    except EdgeRTError as exc:
        print(f"edgert deploy {args.target}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"edgert deploy {args.target}: interrupted", file=sys.stderr)
        return 130
    if args.dry_run:
        print(f"dry run: {len(result.commands)} command(s) printed, none run, nothing written")
        return 0
    print(result.collected.summary())
    print(f"wrote {result.output}")
    return 0


def _linux_options(args: argparse.Namespace) -> Any:
    """The :class:`~edgert.deploy.linux.LinuxOptions` of ``deploy linux`` (or ``jetson --with-edgert``)."""
    from edgert.deploy.linux import LinuxOptions

    def names(raw: str) -> tuple[str, ...]:
        return tuple(n.strip() for n in raw.split(",") if n.strip())

    return LinuxOptions(wheel=args.wheel, wheelhouse=args.wheelhouse, constraint=args.constraint,
                        extras=names(args.extras), python=args.python,
                        ssh_config=getattr(args, "ssh_config", None), runs=args.runs, warmup=args.warmup,
                        delegates=names(args.delegates), system_site_packages=args.target == "jetson")
