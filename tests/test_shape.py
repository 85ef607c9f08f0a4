"""The package's measured shape (issue: every table has one owner, small functions and
modules, no import cycles between concepts). A change that grows past a limit fails here
and says where, so the limit is a decision, not drift."""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "dreaming"
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 600
# click registers commands by importing the command modules from the group's module, and
# they import the group back: the one cycle allowed.
CYCLES_ALLOWED_IN = ("dreaming.cli",)


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def test_no_function_is_longer_than_the_limit() -> None:
    long = [
        f"{path.relative_to(PACKAGE.parent)}:{fn.lineno} {fn.name} ({n} lines)"
        for path in MODULES.values()
        for fn in _functions(ast.parse(path.read_text()))
        if (n := (fn.end_lineno or fn.lineno) - fn.lineno + 1) > MAX_FUNCTION_LINES
    ]
    assert not long, "split into named steps:\n" + "\n".join(long)


def test_no_module_is_longer_than_the_limit() -> None:
    big = [
        f"{path.relative_to(PACKAGE.parent)} ({n} lines)"
        for path in MODULES.values()
        if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    ]
    assert not big, "split by concern:\n" + "\n".join(big)


def test_models_become_tables_in_one_place() -> None:
    places = [
        str(path.relative_to(PACKAGE.parent))
        for path in MODULES.values()
        if any(
            isinstance(node, ast.Attribute) and node.attr == "__table__"
            for node in ast.walk(ast.parse(path.read_text()))
        )
    ]
    assert places == ["dreaming/store/codegen.py"]
    # The models are read only to generate tables.py: importing them at run time would load
    # SQLModel, the ORM and pydantic again (test_startup checks a light run does not).
    readers = sorted(name for name, path in MODULES.items() if "models" in _store_imports(path))
    assert readers == ["dreaming.store.codegen"]


_STORE = "dreaming.store."


def _store_imports(path: Path) -> set[str]:
    """What `path` imports from dreaming.store (submodules and names) in any form."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "dreaming.store":
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(_STORE):
            found.add((node.module or "").split(".")[2])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[2] for a in node.names if a.name.startswith(_STORE)}
    return found


def _imports(name: str, path: Path) -> set[str]:
    """Modules of the package that `name` imports, at any level (function-level and
    TYPE_CHECKING imports count: they are dependencies all the same)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*parent, base] if base else parent)
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names
            ]
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def test_no_import_cycles() -> None:
    graph = {name: _imports(name, path) for name, path in MODULES.items()}
    cycles = [c for c in _cycles(graph) if not all(m.startswith(CYCLES_ALLOWED_IN) for m in c)]
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


# -- who writes what -------------------------------------------------------------------------

TABLES = re.findall(r"^([A-Z_]+) = Table\(", (PACKAGE / "store" / "tables.py").read_text(), re.M)


def _owner(module: str) -> str:
    """A private module's writes are its package's: the parts of a package share its tables."""
    parts = module.split(".")
    while len(parts) > 2 and parts[-1].startswith("_"):
        parts.pop()
    return ".".join(parts)


def _writers(table: str) -> set[str]:
    write = re.compile(
        r"(?:insert\(|update\(|delete\(|upsert\(conn, |insert_ignore\(conn, "
        rf"|upsert_replace\(conn, ){table}\b|\b{table}\.(?:insert|update|delete)\("
        # a lightweight table named after it, as `insert(table(CANDIDATES.name, ...))`
        rf"|\btable\(\s*{table}\.name\b"
    )
    return {_owner(name) for name, path in MODULES.items() if write.search(path.read_text())}


def test_each_table_is_written_by_one_owner() -> None:
    assert len(TABLES) > 20
    shared = {t: sorted(w) for t in TABLES if len(w := _writers(t)) > 1}
    assert not shared, "tables written by more than one owner:\n" + "\n".join(
        f"{t}: {', '.join(w)}" for t, w in shared.items()
    )


def test_the_writer_finder_sees_writes() -> None:
    assert _writers("CANDIDATES") == {"dreaming.ingest.candidates"}
    assert _owner("dreaming.memory.lineage._apply") == "dreaming.memory.lineage"
    assert _owner("dreaming.memory.journal") == "dreaming.memory.journal"


# The stages and the layers under them never import what drives them.
STAGES = ("dreaming.ingest", "dreaming.memory", "dreaming.forget", "dreaming.store", "dreaming.llm")
DRIVERS = (
    "dreaming.phases",
    "dreaming.runner",
    "dreaming.app",
    "dreaming.cli",
    "dreaming.scheduler",
    "dreaming.fleet",
    "dreaming.report",
)


def test_stages_do_not_import_what_drives_them() -> None:
    upward = [
        f"{name} -> {target}"
        for name, path in MODULES.items()
        if name.startswith(STAGES)
        for target in sorted(_imports(name, path))
        if target.startswith(DRIVERS)
    ]
    assert not upward, "upward imports:\n" + "\n".join(upward)


# -- one owner for the on-disk syntax -------------------------------------------------------

SYNTAX = "dreaming.syntax"
# How our markers and the key pattern are spelled: in a string literal anywhere but the
# syntax module, they are a second copy of the syntax that a change would miss.
SPELLED_SYNTAX = re.compile(r"dreaming:(?:entry|group|diary)|m:\[0-9a-f\]|\[0-9a-f\]\{1[0-9]\}")


def _string_literals(tree: ast.AST) -> Iterator[ast.Constant]:
    """String constants that are not docstrings (a docstring may show the syntax)."""
    docstrings = {
        id(body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and (body := node.body)
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings:
                yield node


def test_the_syntax_is_spelled_in_one_module() -> None:
    spelled = [
        f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.value[:60]!r}"
        for name, path in MODULES.items()
        if name != SYNTAX
        for node in _string_literals(ast.parse(path.read_text()))
        if SPELLED_SYNTAX.search(node.value)
    ]
    assert not spelled, "build it from dreaming.syntax:\n" + "\n".join(spelled)
    own = [
        node.value
        for node in _string_literals(ast.parse(MODULES[SYNTAX].read_text()))
        if SPELLED_SYNTAX.search(node.value)
    ]
    assert own, "the finder sees the syntax where it is spelled"


def test_the_syntax_is_the_ground_floor() -> None:
    """It imports nothing of the package but its errors: every stage can build from it."""
    assert _imports(SYNTAX, MODULES[SYNTAX]) <= {"dreaming.errors"}


def test_ingest_reads_memory_only_to_recognise_our_own_output() -> None:
    """Ingestion imports memory only where it recognises MEMORY.md and the diary echoed back
    (invariant 6); writing a file atomically is the syntax module's, not memory's."""
    reaching = {
        name
        for name, path in MODULES.items()
        if name.startswith("dreaming.ingest")
        and any(t.startswith("dreaming.memory") for t in _imports(name, path))
    }
    assert reaching == {"dreaming.ingest.candidates._fold"}


# -- transcript formats as a table ---------------------------------------------------------

TRANSCRIPTS = "dreaming.ingest.transcripts"


def _registrations(tree: ast.AST) -> list[str]:
    """The modules whose FORMAT a `register(_x.FORMAT)` call adds, in order."""
    return [
        node.args[0].value.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "register"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Attribute)
        and node.args[0].attr == "FORMAT"
        and isinstance(node.args[0].value, ast.Name)
    ]


def _defines_format(path: Path) -> bool:
    return any(
        isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "FORMAT" for t in node.targets)
        for node in ast.parse(path.read_text()).body
    )


def test_each_format_is_registered_once() -> None:
    """One module per format, one registration line each, and every format name read."""
    from dreaming.ingest.transcripts import FORMATS
    from dreaming.messages import Format

    registered = _registrations(ast.parse(MODULES[TRANSCRIPTS].read_text()))
    defining = sorted(
        name.rsplit(".", 1)[1]
        for name, path in MODULES.items()
        if name.startswith(TRANSCRIPTS + ".") and _defines_format(path)
    )
    assert sorted(registered) == defining, "register each module's FORMAT once in __init__"
    assert len(set(registered)) == len(registered)
    assert set(FORMATS) == set(Format), "every Format has its table entry"


def _kind_branches(tree: ast.AST) -> list[int]:
    """Lines of the `if`s that branch on a source's `.kind`."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.If | ast.IfExp)
        and any(isinstance(n, ast.Attribute) and n.attr == "kind" for n in ast.walk(node.test))
    ]


def test_source_dispatch_has_no_fallthrough() -> None:
    """Sources are read through the format table, never by an if-chain on the kind whose
    `else` sends a new kind to some other format's discovery."""
    for name in ("dreaming.ingest.sources", "dreaming.doctor._install"):
        lines = _kind_branches(ast.parse(MODULES[name].read_text()))
        assert not lines, f"{name} {lines}: dispatch through format_named(src.kind)"


def test_the_fallthrough_finder_sees_a_kind_branch() -> None:
    tree = ast.parse("if src.kind is SourceKind.CLAUDE_CODE:\n    a()\nelse:\n    b()\n")
    assert _kind_branches(tree) == [1]


# -- the packages' faces -------------------------------------------------------------------

FACES = {
    "dreaming.ingest": {
        "candidates",
        "claims",
        "corpus",
        "grouping",
        "salience",
        "sessions",
        "slots",
        "sources",
        "statements",
        "tags",
        "tombstones",
    },
    "dreaming.memory": {
        "archive",
        "capacity",
        "diary",
        "entry_index",
        "gates",
        "journal",
        "lineage",
        "memory_file",
        "memory_sync",
        "review",
    },
    "dreaming.store": {
        "MIGRATIONS",
        "advisory_lock",
        "agent_lock",
        "cursors",
        "engine",
        "migrate",
        "migrations",
        "models",
        "open_engine",
        "open_shared_engine",
        "redact",
        "schema_version",
        "state",
    },
}


def test_the_faces_export_exactly_the_intended_names() -> None:
    import importlib

    for name, intended in FACES.items():
        module = importlib.import_module(name)
        assert set(module.__all__) == intended, name
        for export in module.__all__:
            assert getattr(module, export) is not None, f"{name}.{export}"


def test_what_the_package_imports_from_a_face_is_on_it() -> None:
    """`from dreaming.ingest import x` anywhere names something the face exports."""
    off_face = [
        f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.module}.{alias.name}"
        for path in [*MODULES.values(), *sorted(PACKAGE.parent.glob("tests/*.py"))]
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module in FACES
        for alias in node.names
        if alias.name not in FACES[node.module]
    ]
    assert not off_face, "add it to the face or import it from its module:\n" + "\n".join(off_face)


# -- bench/ ------------------------------------------------------------------------------------

BENCH = PACKAGE.parent / "bench"


def test_bench_is_small_tools_over_a_shared_library() -> None:
    """The benchmarks keep the package's limits: no function over 80 lines, no module over
    600 (a script is a command line over `_*.py` parts)."""
    paths = sorted(BENCH.glob("*.py"))
    assert len(paths) > 10, "the check sees bench/"
    over = [
        f"bench/{path.name}:{fn.lineno} {fn.name} ({n} lines)"
        for path in paths
        for fn in _functions(ast.parse(path.read_text()))
        if (n := (fn.end_lineno or fn.lineno) - fn.lineno + 1) > MAX_FUNCTION_LINES
    ] + [
        f"bench/{path.name} ({n} lines)"
        for path in paths
        if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    ]
    assert not over, "split into named steps or by concern:\n" + "\n".join(over)


# -- the scheduler on APScheduler's public API -------------------------------------------------


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _apscheduler_private_uses(tree: ast.Module) -> list[str]:
    """Where a module reaches into APScheduler's private names: an import of a private
    module or name, an attribute `_x` read on anything but `self`/`cls` (a job's, an event's,
    the scheduler's), or a private method of an APScheduler base class overridden (its
    abstract hooks excepted: declaring them is how a subclass extends it)."""
    found: list[str] = []
    bases: dict[str, type] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("apscheduler"):
            parts = (node.module or "").split(".")
            for alias in node.names:
                if any(_private(p) for p in parts) or _private(alias.name):
                    found.append(f"{node.lineno}: from {node.module} import {alias.name}")
                else:
                    bases[alias.asname or alias.name] = getattr(
                        importlib.import_module(node.module or ""), alias.name
                    )
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and _private(node.attr)
            and not (isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"})
        ):
            found.append(f"{node.lineno}: .{node.attr}")
        if isinstance(node, ast.ClassDef):
            parents = [bases[b.id] for b in node.bases if isinstance(b, ast.Name) and b.id in bases]
            found += _inherited_private_reads(node, parents)
            for fn in node.body:
                if not isinstance(fn, ast.FunctionDef) or not _private(fn.name):
                    continue
                inherited = [getattr(p, fn.name) for p in parents if hasattr(p, fn.name)]
                if inherited and not all(
                    getattr(m, "__isabstractmethod__", False) for m in inherited
                ):
                    found.append(f"{fn.lineno}: overrides {node.name}.{fn.name}")
    return found


def _inherited_private_reads(cls: ast.ClassDef, parents: list[type]) -> list[str]:
    """`self._x` in a subclass of APScheduler's where `_x` is the base class's, not its own."""
    own = {fn.name for fn in cls.body if isinstance(fn, ast.FunctionDef)} | {
        t.attr
        for node in ast.walk(cls)
        if isinstance(node, ast.Assign | ast.AnnAssign)
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
    }
    return [
        f"{node.lineno}: self.{node.attr} (the base class's)"
        for node in ast.walk(cls)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
        and _private(node.attr)
        and node.attr not in own
        and any(hasattr(p, node.attr) for p in parents)
    ]


def test_the_scheduler_uses_public_apscheduler_names_only() -> None:
    """A 3.x patch release may rename anything private (`job._jobstore_alias`,
    `BaseExecutor._run_job_success`); the service must not notice."""
    uses = {
        name: found
        for name, path in MODULES.items()
        if "apscheduler" in (text := path.read_text())
        and (found := _apscheduler_private_uses(ast.parse(text)))
    }
    assert not uses, uses


def test_the_private_name_finder_sees_each_kind_of_use() -> None:
    code = (
        "from apscheduler.executors.base import BaseExecutor\n"
        "from apscheduler.util import _private_helper\n"
        "class E(BaseExecutor):\n"
        "    def _do_submit_job(self, job, run_times): ...\n"
        "    def _run_job_success(self, job_id, events): ...\n"
        "    def go(self, job):\n"
        "        self._mine = 1\n"
        "        self._run_job_error(job.id, None, None)\n"
        "        return job._jobstore_alias, self._mine\n"
    )
    found = _apscheduler_private_uses(ast.parse(code))
    assert sorted(found) == [
        "2: from apscheduler.util import _private_helper",
        "5: overrides E._run_job_success",
        "8: self._run_job_error (the base class's)",
        "9: ._jobstore_alias",
    ], found
