#!/usr/bin/env python3
"""Test double of OpenSSH ``ssh`` — not the real tool.

``ssh [-o OPT]... [-p PORT] [-i KEY] user@host COMMAND`` runs COMMAND on a fake
Jetson described by the ``jetson`` section of ``EDGERT_DOUBLE_CONFIG``:
``reachable`` (else exit 255 like a refused connection), ``root`` (its
filesystem), ``home``, ``release`` (/etc/nv_tegra_release text), ``model``
(/proc/device-tree/model), ``trtexec`` (where trtexec lives, if anywhere) and
``sudo`` (passwordless sudo), optional ``power_mw`` (``{gpu|dla0|dla1: mW}``:
the board has tegrastats). Understood commands: cat, mkdir -p, test -x/-e,
pwd, python3 -m venv, <venv>/bin/python -m pip install, sudo -n install /
systemctl, ``tegrastats --start --interval MS --logfile F`` / ``--stop`` (the
trtexec double writes the samples while a log is open), and trtexec (handed
to the trtexec test double).
"""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common_double import config, fail, log_call, mapped

_OPTS_WITH_ARG = {"-o", "-p", "-i", "-l", "-F", "-J", "-L", "-R", "-D", "-E", "-c", "-m", "-b", "-W"}


def main(argv: list[str]) -> int:
    log_call("ssh", argv)
    jet = config()["jetson"]
    args = list(argv)
    while args and args[0].startswith("-"):
        args = args[2:] if args[0] in _OPTS_WITH_ARG else args[1:]
    if not args:
        fail("usage: ssh destination [command]", 255)
    host, command = args[0], " ".join(args[1:])
    if not jet.get("reachable", True):
        fail(f"ssh: connect to host {host.split('@')[-1]} port 22: Connection refused", 255)
    root, home = Path(jet["root"]), jet.get("home", "/home/nvidia")
    cwd = mapped(root, home)
    cwd.mkdir(parents=True, exist_ok=True)
    return run(jet, root, home, cwd, shlex.split(command))


def run(jet: dict, root: Path, home: str, cwd: Path, argv: list[str]) -> int:
    prog = argv[0]
    at = lambda p: mapped(root, p, home)
    if prog == "cat":
        if argv[1] == "/etc/nv_tegra_release" and jet.get("release"):
            print(jet["release"])
            return 0
        if argv[1] == "/proc/device-tree/model" and jet.get("model"):
            sys.stdout.write(jet["model"] + "\x00")
            return 0
        if at(argv[1]).is_file():
            sys.stdout.write(at(argv[1]).read_text())
            return 0
        fail(f"cat: {argv[1]}: No such file or directory")
    if prog == "mkdir":
        for p in argv[1:]:
            if not p.startswith("-"):
                at(p).mkdir(parents=True, exist_ok=True)
        return 0
    if prog == "pwd":
        print(home)
        return 0
    if prog == "test":
        return 0 if _is_trtexec(jet, argv[2]) or at(argv[2]).exists() else 1
    if prog == "tegrastats":
        if "power_mw" not in jet:
            fail(f"bash: {prog}: command not found", 127)
        marker = root / ".tegrastats"
        if "--stop" in argv:
            marker.unlink(missing_ok=True)
        elif "--start" in argv:
            marker.write_text(str(at(argv[argv.index("--logfile") + 1])))
        return 0
    if _is_trtexec(jet, prog):
        import subprocess
        double = Path(__file__).resolve().parent / "trtexec_double.py"
        return subprocess.run([sys.executable, str(double), *argv[1:]], check=False, cwd=cwd).returncode
    if prog == "python3" and argv[1:3] == ["-m", "venv"]:
        venv = at(argv[-1])
        (venv / "bin").mkdir(parents=True, exist_ok=True)
        (venv / "bin" / "python").write_text("test-double venv python\n")
        return 0
    if prog.endswith("/bin/python") and argv[1:4] == ["-m", "pip", "install"]:
        if not at(prog).exists():
            fail(f"bash: {prog}: No such file or directory", 127)
        wheel = at(argv[-1])
        if not wheel.exists():
            fail(f"ERROR: Could not find a version that satisfies the requirement {argv[-1]}")
        print(f"Processing ./{argv[-1]}\nSuccessfully installed edgert-0.1.0")
        return 0
    if prog == "sudo":
        if not jet.get("sudo", False):
            fail("sudo: a password is required")
        sub = argv[2:] if argv[1] == "-n" else argv[1:]
        if sub[0] == "install":
            dst = mapped(root, sub[-1])
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(at(sub[-2]), dst)
            return 0
        if sub[0] == "systemctl":
            return 0
        fail(f"sudo: {sub[0]}: command not found")
    fail(f"bash: {prog}: command not found", 127)
    return 127


def _is_trtexec(jet: dict, path: str) -> bool:
    return bool(jet.get("trtexec")) and path == jet["trtexec"]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
