"""`dreaming` run the way a test needs it (issue #24): in this process through Click's
CliRunner when only the command's outcome matters (exit status, stdout, stderr: the CLI's
semantics), as a real process when the test is about the process (a crash point kills it,
a signal stops it, a resource limit or dropped privileges hold it).

Both return a `subprocess.CompletedProcess`, so a test's assertions read the same whichever
way a command ran. A real process pays the interpreter's and the library's start-up (about a
CPU-second); most tests that ran every command as one paid only that.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence

from click.testing import CliRunner

from dreaming.cli import register_commands

# The variables a command runs without by default: the DREAMING_ switches (crash and pause
# points among them) of the test process.
LEFT_OUT = ("DREAMING_",)


def in_process(
    args: Sequence[str], left_out: tuple[str, ...] = LEFT_OUT
) -> subprocess.CompletedProcess[str]:
    """`dreaming ARGS` in this process, without the variables whose names start with one of
    `left_out`, as `process` would start it without `env`. An exception the CLI does not
    turn into an exit status fails the test with its traceback (a process would print it
    and exit 1)."""
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith(left_out)}
    result = CliRunner().invoke(
        register_commands(), list(args), env=unset, catch_exceptions=False, prog_name="dreaming"
    )
    return subprocess.CompletedProcess(
        ["dreaming", *args], result.exit_code, result.stdout, result.stderr
    )


def process(
    args: Sequence[str],
    env: Mapping[str, str] | None = None,
    *,
    left_out: tuple[str, ...] = LEFT_OUT,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """`python -m dreaming ARGS` as a real process: this one's environment without the
    variables `left_out` names, with `env` added (a crash point, a pause point)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(left_out)}
    return subprocess.run(
        [sys.executable, "-m", "dreaming", *args],
        capture_output=True,
        text=True,
        env=clean | dict(env or {}),
        timeout=timeout,
        check=False,
    )
