"""The dependency direction (docs/architecture.md): apps > recursion > edgert > delegates > scheduler.

The contracts live in ``.importlinter`` and are checked by import-linter: imports point
down only, the runtime core does not import the tools around it, backend families do not
import each other's SDKs. What import-linter cannot say (an allow-list of third-party
packages) is checked here: ``scheduler`` imports only the standard library and numpy.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_import_contracts_hold():
    exe = shutil.which("lint-imports")
    if exe is None:
        pytest.fail("import-linter is not installed: pip install -e '.[test]'")
    r = subprocess.run([exe, "--config", str(ROOT / ".importlinter")], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 broken" in r.stdout


def test_scheduler_needs_only_stdlib_and_numpy():
    allowed = set(sys.stdlib_module_names) | {"numpy", "scheduler", "__future__"}
    for path in (ROOT / "scheduler").rglob("*.py"):
        bad = imported_roots(path) - allowed
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


@pytest.mark.slow
def test_mypy_is_clean_on_the_runtime_packages():
    """edgert/, scheduler/ and delegates/ type-check ([tool.mypy] in pyproject.toml)."""
    if shutil.which("mypy") is None:
        pytest.fail("mypy is not installed: pip install -e '.[test]'")
    r = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


# -- the core readable (issue 40): what a newcomer must not meet again --------------------------------

PRODUCT = ("edgert", "delegates", "scheduler", "apps", "recursion")
#: The most lines a function of the product may span, its ``def`` line to its last.
MAX_FUNCTION_LINES = 60


def _product_files() -> list[Path]:
    return sorted(p for pkg in PRODUCT for p in (ROOT / pkg).rglob("*.py"))


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_function_of_the_product_is_longer_than_a_screen():
    long = []
    for path in _product_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1   # type: ignore[operator]
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({n} lines)")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines (split them along a seam): {long}"


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imports(path: Path, module: str, known: set[str]) -> set[str]:
    """The product modules ``module`` imports, at any level (a function's imports too), except under
    ``if TYPE_CHECKING:``; ``from a import b`` is an edge to ``a.b`` when that is a module, else to ``a``."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    out: set[str] = set()

    def add(name: str) -> None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name and name != module:
            out.add(name)

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for stmt in child.orelse:
                    visit_one(stmt)
                continue
            visit_one(child)

    def visit_one(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            for a in node.names:
                add(a.name)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[:len(package) - node.level + 1] + [node.module or ""]).strip(".") \
                if node.level else node.module or ""
            for a in node.names:
                add(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base)
        visit(node)

    visit(ast.parse(path.read_text()))
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_no_import_cycle_in_the_product_not_even_through_a_function_level_import():
    files = {_module_name(p): p for p in _product_files()}
    graph = {m: _imports(p, m, set(files)) for m, p in files.items()}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


#: Private attributes of ONNX Runtime and CPython that the product must not touch, read as an attribute or named
#: in a string (``getattr(x, "_sess")``): ``InferenceSession._sess``, ``Future._done_callbacks`` (and, below,
#: ``subprocess._active``: a name common enough to be checked on its module only).
PRIVATE_ATTRIBUTES = frozenset({"_sess", "_done_callbacks", "_interpreter"})
#: The one documented exception, file -> private attribute: LiteRT's ``Interpreter._interpreter``, read in one place
#: (``delegates.litert.NATIVE_INTERPRETER``: no public API lists which delegate took which node; without it
#: placement is empty and the coverage check is skipped).
PRIVATE_EXCEPTIONS = {"delegates/litert.py": "_interpreter"}
#: Calls that start a process, looked for in a function registered with ``atexit``.
SPAWNS = frozenset({"Popen", "run", "call", "check_call", "check_output", "fork", "forkpty", "system", "Process",
                    "posix_spawn", "posix_spawnp", "spawnl", "spawnle", "spawnlp", "spawnv", "spawnve", "spawnvp",
                    "startfile", "create_subprocess_exec", "create_subprocess_shell"})


def _dotted(node: ast.AST) -> str:
    """``a.b.c`` for an attribute chain on a name, else ""."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else ""


def registered_at_exit(source: str) -> set[str]:
    """Names of the functions ``source`` registers with ``atexit`` (called, or as a decorator)."""
    names = set()
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                _dotted(d) in ("atexit.register", "register") for d in n.decorator_list):
            names.add(n.name)
        elif isinstance(n, ast.Call) and _dotted(n.func) in ("atexit.register", "register") and n.args:
            target = n.args[0]
            names.add(target.id if isinstance(target, ast.Name) else getattr(target, "attr", ""))
    return names


def private_api_uses(source: str, cli: bool = False, exit_handlers: set[str] | None = None) -> list[str]:
    """What ``source`` does of the bar's private or host-hostile tricks, one line each with its line number:
    a private attribute (:data:`PRIVATE_ATTRIBUTES`), ``tuple.__new__``, a descriptor's ``__set__``,
    ``exec(``, ``gc.collect()`` (allowed only in the command line: ``cli``), a process spawned from an
    ``atexit`` handler (a function registered here, or named in ``exit_handlers``: registered elsewhere)."""
    tree = ast.parse(source)
    out = []
    for n in ast.walk(tree):
        line = getattr(n, "lineno", 0)
        if isinstance(n, ast.Attribute) and n.attr in PRIVATE_ATTRIBUTES:
            out.append(f"{line}: private attribute .{n.attr}")
        elif isinstance(n, ast.Constant) and n.value in PRIVATE_ATTRIBUTES:
            out.append(f"{line}: private attribute named {n.value!r}")
        elif isinstance(n, ast.Attribute) and _dotted(n) == "subprocess._active":
            out.append(f"{line}: subprocess._active")
        elif isinstance(n, ast.Attribute) and n.attr == "__new__" and _dotted(n.value) == "tuple":
            out.append(f"{line}: tuple.__new__ as a constructor")
        elif isinstance(n, ast.Attribute) and n.attr == "__set__":
            out.append(f"{line}: a descriptor's __set__ called directly")
        elif isinstance(n, ast.Call) and _dotted(n.func) in ("exec", "builtins.exec"):
            out.append(f"{line}: exec")
        elif isinstance(n, ast.Call) and _dotted(n.func) == "gc.collect" and not cli:
            out.append(f"{line}: gc.collect() outside the command line")
    handlers = registered_at_exit(source) | (exit_handlers or set())
    for f in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        if f.name not in handlers:
            continue
        for n in ast.walk(f):
            if isinstance(n, ast.Call) and _dotted(n.func).rpartition(".")[2] in SPAWNS:
                out.append(f"{n.lineno}: {_dotted(n.func)} in exit handler {f.name}")
    return out


def test_the_product_uses_no_private_api_and_starts_no_process_at_exit():
    """No private attribute of CPython / ONNX Runtime / LiteRT (``InferenceSession._sess``, ``subprocess._active``,
    ``Future._done_callbacks``), no ``tuple.__new__`` as a fast constructor, no slot descriptor's ``__set__``,
    no ``exec``, no ``gc.collect()`` outside the CLI, no process spawned from an exit handler."""
    at_exit = {name for p in _product_files() for name in registered_at_exit(p.read_text())}
    found = [f"{p.relative_to(ROOT)}:{hit}" for p in _product_files()
             for hit in private_api_uses(p.read_text(), p.is_relative_to(ROOT / "edgert" / "cli"), at_exit)]
    excepted = [f for f in found if f.endswith(f"private attribute named {PRIVATE_EXCEPTIONS.get(f.split(':')[0])!r}")]
    assert len(excepted) <= len(PRIVATE_EXCEPTIONS), excepted   # the exception is read in one place, by name
    assert [f for f in found if f not in excepted] == []


def test_litert_private_interpreter_is_the_one_exception_and_is_caught_elsewhere():
    """``Interpreter._interpreter`` anywhere but its one documented place is caught, read or named."""
    assert private_api_uses("n = interp._interpreter.NumNodes()")
    assert private_api_uses("raw = getattr(interp, '_interpreter', None)")
    from delegates import litert

    assert litert.NATIVE_INTERPRETER == "_interpreter"


@pytest.mark.parametrize("snippet", [
    "x = sess._sess.run(outs, feeds)",
    "core = getattr(sess, '_sess', None)",
    "import subprocess\nsubprocess._active.remove(child)",
    "f._done_callbacks.append(cb)",
    "_new = tuple.__new__",
    "Result.__dict__['status'].__set__(r, 'ok')",
    "exec(src, env)",
    "import gc\ngc.collect()",
    "import atexit, subprocess\ndef bye():\n    subprocess.Popen(['true'])\natexit.register(bye)",
    "import atexit, os\n@atexit.register\ndef bye():\n    os.fork()",
])
def test_the_private_api_finder_finds_each_trick(snippet: str):
    assert private_api_uses(snippet)


def test_the_private_api_finder_follows_an_exit_handler_registered_in_another_module():
    spawner = "import subprocess\ndef filter_at_exit():\n    subprocess.Popen(['cat'])"
    registrar = "import atexit\nfrom helpers import filter_at_exit\natexit.register(filter_at_exit)"
    assert private_api_uses(spawner, exit_handlers=registered_at_exit(registrar))
    assert private_api_uses(spawner) == []


def test_the_private_api_finder_passes_plain_code():
    assert private_api_uses("import atexit\ndef bye():\n    print('bye')\natexit.register(bye)\n"
                            "sess.run(outs, feeds)\nx = Assignment(1, 'cpu0')") == []
    assert private_api_uses("import gc\ngc.collect()", cli=True) == []


def test_no_class_of_the_core_inherits_a_class_of_another_core_module():
    core = ROOT / "edgert" / "_core"
    classes = {p.stem: {n.name for n in ast.walk(ast.parse(p.read_text())) if isinstance(n, ast.ClassDef)}
               for p in core.glob("*.py")}
    mixed = []
    for p in core.glob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ClassDef):
                for base in node.bases:
                    name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", "")
                    owners = [m for m, names in classes.items() if name in names and m != p.stem]
                    if owners and name not in classes[p.stem]:
                        mixed.append(f"{p.stem}.{node.name}({name} of {owners[0]})")
    assert mixed == []


def test_the_public_classes_report_edgert_as_their_module():
    import edgert

    assert [c.__module__ for c in (edgert.Runtime, edgert.Model, edgert.Result, edgert.Frame)] == ["edgert"] * 4


def test_no_compiled_module_is_older_than_its_source():
    """``tools/compile.py`` builds the simulator's and the request path's hot modules beside their sources, and Python
    imports a compiled module first: one older than its source would run code that is no longer there."""
    stale = [str(so.relative_to(ROOT)) for tree in ("scheduler", "edgert") for so in ROOT.glob(f"{tree}/**/*.so")
             if so.with_name(so.name.split(".")[0] + ".py").exists()
             and so.stat().st_mtime < so.with_name(so.name.split(".")[0] + ".py").stat().st_mtime]
    assert stale == [], "rebuild (python tools/compile.py) or remove (python tools/compile.py --clean) these"


def test_one_sync_request_reads_in_few_files():
    """A sync request's life reads in one core module (``edgert/_core/_run.py``) beside the ``Model`` facade:
    one call on a tiny ONNX model enters at most 3 files of ``edgert/_core`` and 8 product files in all
    (every Python function it calls, found with ``sys.setprofile``)."""
    import edgert
    from edgert.testing import genmodels

    entered: list[str] = []

    def profile(frame, event, arg):  # noqa: ARG001 - sys.setprofile's signature
        if event == "call":
            path = Path(frame.f_code.co_filename)
            if path.is_relative_to(ROOT) and path.parts[len(ROOT.parts)] in PRODUCT:
                entered.append(path.relative_to(ROOT).as_posix())

    with edgert.Runtime(delegates=["ort-cpu"], cpu_workers=1) as rt:
        m = rt.load(genmodels.build("tiny", "onnx"), name="tiny", format="onnx")
        x = genmodels.example_inputs("tiny")
        for _ in range(3):   # past the first request's one-time checks
            m(x)
        sys.setprofile(profile)
        try:
            m(x)
        finally:
            sys.setprofile(None)
    files = set(entered)
    from edgert._core import _run
    if not _run.__file__.endswith(".py"):   # compiled (tools/compile.py): its calls are C calls, unseen by the profiler
        files.add("edgert/_core/_run.py")
    core = {f for f in files if f.startswith("edgert/_core/")}
    assert "edgert/_core/_run.py" in core, files
    assert len(core) <= 3, sorted(core)
    assert len(files) <= 8, sorted(files)


def test_the_apps_import_only_public_edgert_names():
    """An app is written against edgert's public surface: no module or name whose path has a private part."""
    private = []
    for path in sorted((ROOT / "apps").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [f"{node.module}.{a.name}" for a in node.names] if isinstance(node, ast.ImportFrom) and node.module
                     else [])
            private += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names
                        if n.split(".")[0] == "edgert" and any(part.startswith("_") for part in n.split("."))]
    assert private == []
