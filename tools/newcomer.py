"""A newcomer's check: the README's two commands, as written, in a fresh venv on a given Python.

Makes a new venv with ``--python`` (default: this interpreter), then runs each line of the README's
"Two commands" block with bash in the checkout (or, with ``--clone``, in a fresh ``git clone`` of its
HEAD), the venv first on ``PATH`` as if activated and nothing of the caller's ``PYTHONPATH``. Each
command's output goes to its log beside the venv; each gets one report line (✓ or ✗, exit status,
seconds) after the demo's per-stream lines, pytest's summary and the last lines of its output.
``--also CMD`` runs more commands the same way afterwards (e.g. a one-cell ``edgert sweep``). Exits 0
when every command succeeded, else 1.

    python tools/newcomer.py --python python3.13            # what .ci/run does for the second Python
    python tools/newcomer.py --python ~/.pyenv/versions/3.12.1/bin/python --clone --only 1 \\
        --also "edgert sweep grid.toml -o cells.csv --jobs 1"
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: lines of a command's output that its report repeats: the demo's per-stream results, pytest's summary
KEY_LINES = re.compile(r"frames whose whole cascade met its deadline|^=* ?\d+ (passed|failed)|^=* ?\d+ failed")


def readme_commands(readme: Path) -> list[str]:
    """The lines of the first ``bash`` block under the README's "## Two commands" heading."""
    text = readme.read_text()
    m = re.search(r"^## Two commands\n(.*?)^## ", text, flags=re.S | re.M)
    block = re.search(r"```bash\n(.*?)```", m.group(1), flags=re.S) if m else None
    if block is None:
        raise SystemExit(f"{readme}: no ```bash block under '## Two commands'")
    return [line for line in block.group(1).splitlines() if line.strip() and not line.lstrip().startswith("#")]


def venv_env(venv: Path) -> dict[str, str]:
    """The environment of a shell with ``venv`` activated, the caller's Python settings left out."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYENV_VERSION", "__PYVENV_LAUNCHER__")}
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def run(cmd: str, cwd: Path, env: dict[str, str], log: Path, timeout_s: float, tail: int) -> bool:
    """Run ``cmd`` with bash; print its report line and its last ``tail`` lines; whether it exited 0."""
    print(f"$ {cmd}", flush=True)
    t0 = time.perf_counter()
    with open(log, "wb") as out:
        try:
            rc = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                timeout=timeout_s).returncode
        except subprocess.TimeoutExpired:
            rc = None
    s = time.perf_counter() - t0
    lines = log.read_text(errors="replace").splitlines()
    shown = lines[-tail:] if tail else []
    for line in [x for x in lines[:len(lines) - len(shown)] if KEY_LINES.search(x)] + shown:
        print(f"    {line}")
    mark = "✓" if rc == 0 else "✗"
    status = f"exit {rc}" if rc is not None else f"timed out after {timeout_s:.0f} s"
    print(f"{mark} {status}, {s:.0f} s: {cmd}   (log: {log})", flush=True)
    return rc == 0


def main(argv: list[str] | None = None) -> int:
    """Make the venv, run the README's commands (and ``--also``'s), report each; 0 when all succeeded."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=sys.executable, help="the interpreter to make the venv with")
    ap.add_argument("--dir", type=Path, default=None,
                    help="where the venv, the logs (and the clone) go; default a new temporary directory, kept")
    ap.add_argument("--clone", action="store_true", help="run in a fresh git clone of the checkout's HEAD")
    ap.add_argument("--only", type=int, nargs="+", default=None, metavar="N",
                    help="run only these of the README's commands (1-based)")
    ap.add_argument("--also", action="append", default=[], metavar="CMD", help="one more command, after them")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per command (default 3600)")
    ap.add_argument("--tail", type=int, default=12, help="lines of each command's output to print (default 12)")
    args = ap.parse_args(argv)

    python = shutil.which(args.python) or args.python
    work = args.dir or Path(tempfile.mkdtemp(prefix="edgert-newcomer-"))
    work.mkdir(parents=True, exist_ok=True)
    cwd = ROOT
    if args.clone:
        cwd = work / "edgert"
        if cwd.exists():
            shutil.rmtree(cwd)
        subprocess.run(["git", "clone", "-q", str(ROOT), str(cwd)], check=True)
    venv = work / "venv"
    version = subprocess.run([python, "-c", "import sys; print(sys.version.split()[0])"], capture_output=True,
                             text=True, check=True).stdout.strip()
    subprocess.run([python, "-m", "venv", "--clear", str(venv)], check=True)
    print(f"Python {version} ({python}), fresh venv {venv}, in {cwd}", flush=True)
    env = venv_env(venv)
    commands = readme_commands(cwd / "README.md")
    chosen = [c for i, c in enumerate(commands, 1) if args.only is None or i in args.only] + args.also
    results = [(c, run(c, cwd, env, work / f"command{i}.log", args.timeout, args.tail))
               for i, c in enumerate(chosen, 1)]
    print(f"\nPython {version}: " + "; ".join(f"{'✓' if ok else '✗'} {c.split('#')[0].strip()}"
                                             for c, ok in results), flush=True)
    return 0 if all(ok for _, ok in results) else 1


if __name__ == "__main__":
    sys.exit(main())
