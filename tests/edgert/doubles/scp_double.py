#!/usr/bin/env python3
"""Test double of OpenSSH ``scp`` — not the real tool.

``scp [-q] [-o OPT]... SRC... user@host:DEST`` copies local files into the fake
Jetson's filesystem (``jetson.root``; relative DEST is under ``jetson.home``),
or exits 255 like a refused connection when ``jetson.reachable`` is false.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common_double import config, fail, log_call, mapped

_OPTS_WITH_ARG = {"-o", "-P", "-i", "-F", "-J", "-c", "-l", "-S"}


def main(argv: list[str]) -> int:
    log_call("scp", argv)
    jet = config()["jetson"]
    args, files = list(argv), []
    while args:
        a = args.pop(0)
        if a in _OPTS_WITH_ARG:
            args.pop(0)
        elif not a.startswith("-"):
            files.append(a)
    *sources, dest = files
    host, _, remote = dest.partition(":")
    if not jet.get("reachable", True):
        fail(f"ssh: connect to host {host.split('@')[-1]} port 22: Connection refused\nscp: Connection closed", 255)
    target = mapped(Path(jet["root"]), remote or ".", jet.get("home", "/home/nvidia"))
    for s in sources:
        src = Path(s)
        if not src.is_file():
            fail(f"scp: stat local \"{s}\": No such file or directory")
        dst = target / src.name if remote.endswith("/") or target.is_dir() else target
        if not dst.parent.is_dir():
            fail(f"scp: dest open \"{remote}\": No such file or directory")
        shutil.copyfile(src, dst)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
