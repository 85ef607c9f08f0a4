"""The one exception hierarchy of dreaming.

    DreamingError                  root; every error the library raises on purpose
    ├── ConfigError                a settings or job file is invalid (names file and key)
    ├── StateError                 the state folder or a database cannot be used
    │   ├── SchemaTooNewError      a database written by a newer dreaming
    │   ├── StorageError           a file that cannot be written (read-only, disk full) or
    │   │                          read (damaged); names the file and what to do
    │   ├── NoAgentsError          the state folder has no agents at all (a wrong path?)
    │   ├── NoSuchError            a name given matches nothing (agent, session, participant)
    │   └── LockedError            another run holds the agent's lock
    ├── InputError                 a transcript or other input cannot be read at all
    ├── LLMError                   an LLM call failed for good
    │   ├── LLMConfigError         missing key, unknown profile, no price for a budget
    │   ├── LLMRequestError        a 4xx the retry policy must not retry (bad request, auth)
    │   ├── TransientError         worth retrying: 429, 5xx, timeouts, connection errors
    │   ├── EndpointDownError      the run's circuit breaker is open: no call was made
    │   └── InvalidReplyError      the reply did not validate
    └── BudgetExceededError        a call would go past the run's or the day's budget

CLI commands turn these into one-line messages with the next step; anything else is a bug.
`ExitCode` is every command's exit status (the README's table is this one) and `exit_code`
the status an error ends a command with.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """The exit statuses of every command, for cron and scripts to act on. The worst one
    wins when agents end differently: FAILED over DEGRADED over BUSY."""

    OK = 0  # done (run outcomes ok, budget, preview); nothing to do is done too
    FAILED = 1  # an agent's run failed, a storage fault, verify found violations, an
    # endpoint that `llm check` found unable to serve a night
    USAGE = 2  # an option, a settings or job file, a name that matches nothing, a missing
    # API key, a state folder with no agents at all: nothing was run
    DEGRADED = 3  # a fallback decided what the model should have; `scheduler status`: none runs
    BUSY = 75  # another run holds an agent's lock: skipped, try again (sysexits' EX_TEMPFAIL)
    INTERRUPTED = 130  # Ctrl-C or SIGTERM (128 + SIGINT, as a shell reports it)


class DreamingError(Exception):
    """Root of every error dreaming raises on purpose."""


class ConfigError(DreamingError):
    """A settings or job file is invalid; the message names the file and the key."""


class StateError(DreamingError):
    """The state folder or an agent database cannot be used."""


class SchemaTooNewError(StateError):
    def __init__(self, path: str, found: int, supported: int) -> None:
        super().__init__(
            f"{path}: database schema version {found} is newer than this dreaming supports "
            f"({supported}); upgrade dreaming or point --state-dir elsewhere"
        )
        self.path = path
        self.found = found
        self.supported = supported


class StorageError(StateError):
    """A file of the state folder or a workspace that cannot be used as it is: read-only,
    on a full (or failing) disk, or damaged. The message names the file, what is wrong and
    what to do; the step that met it wrote nothing."""

    def __init__(self, path: str, problem: str, remedy: str) -> None:
        super().__init__(f"{path}: {problem}; {remedy}")
        self.path = path
        self.problem = problem


class WorkspaceFileError(StateError):
    """A file in an agent's workspace (MEMORY.md, DREAMS.md) that dreaming cannot keep
    faithfully: not UTF-8, not a regular file. That agent's night fails; nothing is rewritten."""


class NoAgentsError(StateError):
    """Nothing in the state folder or the configured sources looks like an agent: most
    likely a wrong --state-dir, which must not pass for a quiet night."""


class NoSuchError(StateError):
    """A name given on the command line matches nothing: an agent, a session, a
    participant or hook source to forget. Nothing was done."""


class LockedError(StateError):
    def __init__(self, agent: str, holder: str, waited_s: float = 0) -> None:
        waited = f"; waited {waited_s:g}s" if waited_s else ""
        super().__init__(f"agent {agent!r} is busy: another run holds its lock ({holder}){waited}")
        self.agent = agent
        self.holder = holder


class LockLostError(StateError):
    """The agent's lock went away during a run (its database session died): the run stops."""

    def __init__(self, agent: str, why: str) -> None:
        super().__init__(f"agent {agent!r}: the run lost its lock ({why}); stopping")
        self.agent = agent


class InputError(DreamingError):
    """An input file cannot be read at all (not a per-line problem: those are counted skips)."""


class LLMError(DreamingError):
    """An LLM call failed for good."""


class LLMConfigError(LLMError):
    """The LLM profile cannot be used as configured."""


class LLMRequestError(LLMError):
    """The server refused the request in a way retrying cannot fix (4xx other than 429)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class TransientError(LLMError):
    """A failure worth retrying: rate limit, timeout, connection error, 5xx."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class EndpointDownError(LLMError):
    """An earlier call of this run failed at the transport and retries did not cure it, so
    the run sends nothing more to that endpoint (the caller takes its fallback)."""


class InvalidReplyError(LLMError):
    """The model's reply did not parse or validate."""


class BudgetExceededError(DreamingError):
    """A call would exceed the remaining budget; it was not made."""


def exit_code(err: BaseException) -> ExitCode:
    """The exit status a command that stopped on `err` ends with."""
    if isinstance(err, KeyboardInterrupt):
        return ExitCode.INTERRUPTED
    if isinstance(err, LockedError):
        return ExitCode.BUSY
    if isinstance(err, ConfigError | NoAgentsError | NoSuchError | LLMConfigError):
        return ExitCode.USAGE
    return ExitCode.FAILED
