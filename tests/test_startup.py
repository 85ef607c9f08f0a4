"""CLI start-up stays cheap (issue #24): importing the CLI and registering its commands loads
none of the heavy libraries. Commands import the library when they run, so `dreaming --help`,
`--version` and a usage error never pay for SQLAlchemy, the report or the scheduler.

Each check runs in a fresh interpreter: this process has imported everything already.
"""

from __future__ import annotations

import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import dreaming.cli
from tests.openclaw_builder import FakeOpenClaw

# What a start-up must not load; each costs tenths of a second to import.
HEAVY = ("sqlalchemy", "sqlmodel", "jinja2", "apscheduler", "openai")
# Command modules that still import the library at module level (owned elsewhere; issue #24
# lists them): registering them loads SQLAlchemy.
NOT_YET_LAZY: tuple[str, ...] = ()


def loaded_after(code: str) -> set[str]:
    """The top-level packages of HEAVY that `code` leaves in sys.modules."""
    probe = (
        f"{code}\nimport json, sys\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def command_modules() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(dreaming.cli.__path__))


def test_importing_the_cli_loads_no_heavy_library() -> None:
    assert loaded_after("import dreaming.cli") == set()


def test_registering_the_commands_loads_no_heavy_library() -> None:
    modules = [m for m in command_modules() if m not in NOT_YET_LAZY]
    assert {"_main", "_run", "_jobs", "_scheduler", "_report", "_status"} <= set(modules)
    imports = "\n".join(f"import dreaming.cli.{m}" for m in modules)
    assert loaded_after(imports) == set()


def test_dreaming_help_loads_no_heavy_library() -> None:
    code = (
        "import contextlib, io, sys\n"
        "sys.argv = ['dreaming', '--help']\n"
        "from dreaming.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main()"
    )
    assert loaded_after(code) == set()


def test_the_search_limit_default_is_the_library_s() -> None:
    from dreaming.cli import _search
    from dreaming.search import DEFAULT_LIMIT

    assert _search.DEFAULT_LIMIT == DEFAULT_LIMIT


# What a light run over a few sessions must not load: it is mostly start-up, and each of these
# costs tens of milliseconds (SQLModel and the ORM with the models' pydantic classes ~0.2 s).
NOT_FOR_LIGHT = (
    "sqlmodel",
    "sqlalchemy.orm",
    "sqlalchemy.dialects.postgresql",
    "jinja2",
    "openai",
    "dreaming.store.models",
    "dreaming.memory.decisions",
    "dreaming.phases.deep._phase",
    "multiprocessing",
    # REM's phase, the LLM call layer and a purge's plan, report and scrubbing: a night
    # only asks whether a purge was cut short (#24: 14 ms of a light run's start-up).
    "dreaming.phases.rem",
    "dreaming.llm.calls",
    "dreaming.forget._purge",
    "dreaming.forget._scrub",
    "dreaming.forget._report",
)


def test_a_light_run_loads_neither_the_orm_nor_deep_s_machinery(tmp_path: Path) -> None:
    FakeOpenClaw(tmp_path).session("main", "s1", [("user", "I live in Lisbon.")])
    code = (
        "from pathlib import Path\n"
        "from dreaming import runner\n"
        "from dreaming.app import App\n"
        f"app = App.open(Path({str(tmp_path)!r}), None, env={{}})\n"
        "[light] = runner.run_light(app)\n"
        "assert light['corpus_lines'] == 1, light\n"
        "import json, sys\n"
        f"print(json.dumps(sorted(m for m in {NOT_FOR_LIGHT!r} if m in sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_a_night_off_a_terminal_loads_no_progress_bars(tmp_path: Path) -> None:
    """Under cron or into a pipe, progress is a line per phase: rich (a twentieth of a small
    run's start-up) is imported only where stderr may be a terminal."""
    FakeOpenClaw(tmp_path).session("main", "s1", [("user", "I live in Lisbon.")])
    code = (
        "import json, sys\n"
        "from dreaming.cli import _main\n"
        f"sys.argv = ['dreaming', '--state-dir', {str(tmp_path)!r}, 'run', '--phase', 'light']\n"
        "try:\n"
        "    _main.main()\n"
        "except SystemExit as stop:\n"
        "    assert stop.code in (0, None), stop.code\n"
        "print(json.dumps(sorted(m for m in sys.modules if m == 'rich' or m.startswith('rich.'))))"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env=env,
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
    assert "light:" in done.stderr  # the one summary line a night off a terminal prints


def test_forced_colour_still_asks_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    from dreaming.cli import _progress

    monkeypatch.setenv("FORCE_COLOR", "1")
    assert _progress._may_be_a_terminal()
    monkeypatch.delenv("FORCE_COLOR")
    monkeypatch.setenv("TTY_COMPATIBLE", "0")
    assert _progress._may_be_a_terminal()  # rich decides (here: no)
