"""Mutation testing (mutmut 3) of the runtime core, the policies and the loaders, on a scratch copy.

mutmut rewrites the files it mutates, so this never runs in the checkout: it copies the tracked
files to a scratch directory, writes that copy's ``setup.cfg`` ``[mutmut]`` section for one group
(the files to mutate and the fast tests that target them) and runs ``mutmut run`` there.

    pip install mutmut==3.8.1 pytest-timeout
    python tools/mutation.py core            # or: policies, loaders, all
    python tools/mutation.py policies --dir /tmp/mut-policies --jobs 2
    python tools/mutation.py core --sample 'edgert._core._stats*'   # only mutants matching a glob

Prints killed/total per group (a timeout counts as killed: the mutant hung the tests) and leaves
the scratch copy for ``mutmut results`` / ``mutmut show NAME``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: group -> (files to mutate, tests that target them)
GROUPS: dict[str, tuple[list[str], list[str]]] = {
    "core": (["edgert/_core/_run.py", "edgert/_core/_model.py",
              "edgert/_core/_runtime.py", "edgert/_core/_stats.py", "edgert/_core/_result.py"],
             ["tests/edgert/test_runtime.py", "tests/edgert/test_runtime_results.py", "tests/edgert/test_stats.py",
              "tests/inputs/test_api.py", "tests/edgert/test_dispatch_units.py", "tests/edgert/test_runtime_close.py"]),
    "policies": (["scheduler/policies/*"],
                 ["tests/scheduler/test_policy_contract.py", "tests/scheduler/test_policy_edgert.py",
                  "tests/scheduler/test_policy_band.py", "tests/scheduler/test_policy_overload.py",
                  "tests/scheduler/test_policy_energy_units.py", "tests/scheduler/test_policy_mutants_shares.py",
                  "tests/scheduler/test_policy_mutants_overload.py", "tests/scheduler/test_policy_mutants_slots.py",
                  "tests/scheduler/test_policy_mutants_decide.py", "tests/scheduler/test_policy_mutants_streams.py",
                  "tests/scheduler/test_policy_mutants_band.py"]),
    "loaders": (["scheduler/profile.py", "scheduler/sim/trace.py", "edgert/_core/_loader.py"],
                ["tests/scheduler/test_sim_profiles.py", "tests/scheduler/test_sim_trace.py",
                 "tests/scheduler/test_trace_arrival.py", "tests/inputs/test_profiles.py",
                 "tests/inputs/test_traces.py", "tests/edgert/test_runtime.py",
                 "tests/delegates/test_profile_cmd.py", "tests/inputs/test_profile_fields.py",
                 "tests/inputs/test_trace_fields.py", "tests/edgert/test_loader_choice.py"]),
}
KILLED = {"killed", "timeout", "segfault"}   # mutmut's names for a mutant the tests caught
#: per-test wall-clock limit under mutation (pytest-timeout). The targeted tests take <= 0.2 s each; a mutant
#: that makes one block (a lost wake-up, a lock never released) burns no CPU, so mutmut's CPU-time limit
#: never fires and the suite's own 300 s limit made each such mutant cost minutes. Failing it here kills it.
TEST_TIMEOUT_S = 5


def config(files: list[str], tests: list[str]) -> str:
    """The ``[mutmut]`` section for one group."""
    def block(key: str, values: list[str]) -> str:
        return f"{key} =\n" + "".join(f"    {v}\n" for v in values)
    return ("[mutmut]\n" + block("source_paths", ["edgert", "scheduler"]) + block("only_mutate", files)
            + block("also_copy", ["tests", "recursion", "apps", "delegates", "pyproject.toml"])
            + block("pytest_add_cli_args", ["-p", "no:randomly", "-q", "-x", f"--timeout={TEST_TIMEOUT_S}"])
            + block("pytest_add_cli_args_test_selection", tests))


def copy_tree(dest: Path) -> None:
    """The tracked files of the checkout (no .git, no build outputs) into ``dest``."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / rel).is_file():
            shutil.copy2(ROOT / rel, target)


def score(workdir: Path) -> tuple[int, int, dict[str, int]]:
    """(killed, total, count per status) from ``mutmut results --all true``."""
    out = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"], cwd=workdir,
                         capture_output=True, text=True).stdout
    counts: dict[str, int] = {}
    for line in out.splitlines():
        if ":" in line:
            status = line.rsplit(":", 1)[1].strip()
            counts[status] = counts.get(status, 0) + 1
    done = {k: v for k, v in counts.items() if k not in ("not checked", "skipped")}
    return sum(v for k, v in done.items() if k in KILLED), sum(done.values()), counts


def run_group(name: str, workdir: Path, jobs: int, sample: list[str]) -> tuple[int, int, dict[str, int]]:
    files, tests = GROUPS[name]
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    copy_tree(workdir)
    (workdir / "setup.cfg").write_text(config(files, tests))
    subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", str(jobs), *sample], cwd=workdir)
    return score(workdir)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("group", choices=[*GROUPS, "all"])
    ap.add_argument("--dir", type=Path, help="scratch directory (default: a new temp dir per group)")
    ap.add_argument("--jobs", type=int, default=2, help="mutants tested at once")
    ap.add_argument("--sample", nargs="*", default=[], help="only mutants matching these globs")
    args = ap.parse_args(argv)
    results = {}
    for name in (GROUPS if args.group == "all" else [args.group]):
        workdir = args.dir or Path(tempfile.mkdtemp(prefix=f"edgert-mutation-{name}-"))
        killed, total, counts = run_group(name, workdir, args.jobs, args.sample)
        results[name] = {"killed": killed, "total": total, "score": killed / total if total else None,
                         "counts": counts, "dir": str(workdir)}
        print(f"{name}: {killed}/{total} killed ({results[name]['score'] or 0:.1%}) {counts}  [{workdir}]")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
