"""A reader's checks, by static analysis: the default policy and the request path read in named terms.

What a newcomer must not meet in the policies (tuples of more than 4 fields unpacked by position, module
functions that take the policy as their first parameter), in the scheduler and the core (module docs too
long to read), on the request path (ended requests taken at more than one site), and in the layering (the
policies reaching into the simulator, a library turning the garbage collector off for the whole process).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
POLICIES = ROOT / "scheduler" / "policies"
#: The most fields a tuple read by position may have (a wider record is read by name).
MAX_UNPACKED = 4
#: The most lines of a module's doc in ``scheduler/`` and ``edgert/_core/`` (the default policy's: 40).
MAX_MODULE_DOC = 60
MAX_POLICY_DOC = 40
#: Where the process's garbage collector may be turned off: the command line and the sweep's workers, which own
#: their process.
GC_ENTRY_POINTS = ("edgert/cli/", "edgert/sweep/_cell.py")
PRODUCT = ("edgert", "delegates", "scheduler", "apps", "recursion")


def wide_unpackings(source: str) -> list[str]:
    """``line: n fields`` for each tuple of more than :data:`MAX_UNPACKED` names unpacked by position (an assignment
    or a loop target); a tuple built on the right-hand side and taken apart at once is not one."""
    out = []

    def check(target: ast.AST, value: ast.AST | None, line: int) -> None:
        if not isinstance(target, (ast.Tuple, ast.List)):
            return
        if isinstance(value, ast.Tuple) and len(value.elts) == len(target.elts):
            for t, v in zip(target.elts, value.elts):
                check(t, v, line)
            return
        if len(target.elts) > MAX_UNPACKED:
            out.append(f"{line}: {len(target.elts)} fields unpacked by position")
        for t in target.elts:
            check(t, None, line)

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                check(t, node.value, node.lineno)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            check(node.target, None, node.lineno)
        elif isinstance(node, ast.comprehension):
            check(node.target, None, getattr(node.iter, "lineno", 0))
    return out


def index_arithmetic(source: str) -> list[str]:
    """``line: expr`` for arithmetic between fields of one record read by constant index (``r[3] - r[6]``)."""
    def field_of(node: ast.AST) -> str | None:
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int):
            return ast.unparse(node.value)
        return None

    return [f"{n.lineno}: {ast.unparse(n)}" for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.BinOp) and field_of(n.left) is not None and field_of(n.left) == field_of(n.right)]


def policy_first_functions(source: str) -> list[str]:
    """Module-level functions whose first parameter is the policy (named ``policy`` or annotated with a
    ``…Policy`` class): methods living outside their class."""
    out = []
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.args.args:
            first = node.args.args[0]
            note = ast.unparse(first.annotation) if first.annotation is not None else ""
            if first.arg == "policy" or note.strip("'\"").endswith("Policy"):
                out.append(f"{node.lineno}: {node.name}({first.arg})")
    return out


def doc_lines(source: str) -> int:
    doc = ast.get_docstring(ast.parse(source), clean=False)
    return 0 if doc is None else doc.count("\n") + 1


def ending_takes(source: str) -> list[int]:
    """The lines that call ``….take()`` on the ends (``ends.take()``, ``self.ends.take()``)."""
    return [n.lineno for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "take"
            and "ends" in ast.unparse(n.func.value)]


def sim_imports(source: str) -> list[str]:
    """Imports of ``scheduler.sim`` (at any level: a function's imports too)."""
    out = []
    for n in ast.walk(ast.parse(source)):
        names = [a.name for a in n.names] if isinstance(n, ast.Import) else \
            [n.module or ""] if isinstance(n, ast.ImportFrom) and n.level == 0 else []
        out += [f"{n.lineno}: {name}" for name in names if name == "scheduler.sim" or name.startswith("scheduler.sim.")]
    return out


def gc_disables(source: str) -> list[int]:
    return [n.lineno for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Call) and ast.unparse(n.func) in ("gc.disable", "disable")
            and "gc" in source]


def _files(root: Path) -> list[Path]:
    return sorted(root.rglob("*.py"))


def _rel(p: Path) -> str:
    return p.relative_to(ROOT).as_posix()


def test_no_wide_tuple_is_unpacked_by_position_in_the_policies():
    found = [f"{_rel(p)}:{hit}" for p in _files(POLICIES) for hit in wide_unpackings(p.read_text())]
    assert found == [], "read these by name (a __slots__ class or the view's fields)"


def test_no_record_of_the_policies_is_read_by_index_arithmetic():
    found = [f"{_rel(p)}:{hit}" for p in _files(POLICIES) for hit in index_arithmetic(p.read_text())]
    assert found == []


def test_no_module_function_of_the_policies_takes_the_policy_first():
    found = [f"{_rel(p)}:{hit}" for p in _files(POLICIES) for hit in policy_first_functions(p.read_text())]
    assert found == [], "make it a method, or pass what it needs"


def test_module_docs_are_short_in_the_scheduler_and_the_core():
    long = {_rel(p): n for d in ("scheduler", "edgert/_core") for p in _files(ROOT / d)
            if (n := doc_lines(p.read_text())) > MAX_MODULE_DOC}
    assert long == {}, f"module docs over {MAX_MODULE_DOC} lines (figures go to BENCHMARKS.md, rules to docs/)"
    assert doc_lines((POLICIES / "edgert.py").read_text()) <= MAX_POLICY_DOC


def test_one_site_takes_the_ended_requests():
    run = ROOT / "edgert" / "_core" / "_run.py"
    assert len(ending_takes(run.read_text())) == 1
    others = [f"{_rel(p)}:{line}" for p in _files(ROOT / "edgert") if p != run for line in ending_takes(p.read_text())]
    assert others == []


def test_the_policies_import_nothing_from_the_simulator():
    found = [f"{_rel(p)}:{hit}" for p in _files(POLICIES) for hit in sim_imports(p.read_text())]
    assert found == []


def test_only_the_entry_points_turn_the_garbage_collector_off():
    found = [f"{_rel(p)}:{line}" for pkg in PRODUCT for p in _files(ROOT / pkg)
             if not _rel(p).startswith(GC_ENTRY_POINTS) for line in gc_disables(p.read_text())]
    assert found == []


@pytest.mark.parametrize(("source", "finds"), [
    ("a, b, c, d, e = view", True),
    ("for name, kind, b, q, _, ok, n, f in processors: pass", True),
    ("(a, b, c, d, e), x = procs, 1", True),
    ("a, b, c, d = row", False),
    ("a, b, c, d, e = 1, 2, 3, 4, 5", False),
    ("x = r[3] - r[6]", False),
])
def test_the_unpacking_finder(source: str, finds: bool):
    assert bool(wide_unpackings(source)) is finds


def test_the_other_finders_find_what_they_look_for():
    assert policy_first_functions("def late(policy, req): pass\ndef ok(req, policy): pass") == ["1: late(policy)"]
    assert policy_first_functions("def f(p: EdgertPolicy): pass")
    assert ending_takes("def f(self):\n    done = self.ends.take()\n    q.take()") == [2]
    assert sim_imports("def f():\n    from scheduler.sim.energy import EnergyModel") == ["2: scheduler.sim.energy"]
    assert sim_imports("from scheduler.simple import x") == []
    assert gc_disables("import gc\ngc.disable()") == [2]
    assert doc_lines('"""one\ntwo\n"""') == 3
    assert index_arithmetic("x = r[3] - r[6]") and not index_arithmetic("x = r.deadline_ms - r.downstream_ms")
