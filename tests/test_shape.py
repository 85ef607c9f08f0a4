"""The package's measured shape (issue: every table has one owner, small functions and
modules, no import cycles between concepts). A change that grows past a limit fails here
and says where, so the limit is a decision, not drift."""

from __future__ import annotations

import ast
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
    assert places == ["dreaming/store/tables.py"]


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

TABLES = re.findall(r"^([A-Z_]+) = _table\(", (PACKAGE / "store" / "tables.py").read_text(), re.M)


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


# -- bench/ ------------------------------------------------------------------------------------

BENCH = PACKAGE.parent / "bench"
# bench/ingest.py is being changed on another branch (perf-read); it joins the check when
# that work lands, rather than both branches splitting the same file.
BENCH_NOT_YET = {"ingest.py"}


def test_bench_is_small_tools_over_a_shared_library() -> None:
    """The benchmarks keep the package's limits: no function over 80 lines, no module over
    600 (a script is a command line over `_*.py` parts)."""
    paths = [p for p in sorted(BENCH.glob("*.py")) if p.name not in BENCH_NOT_YET]
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
