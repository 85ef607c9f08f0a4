"""The one exception hierarchy of dreaming.

    DreamingError                  root; every error the library raises on purpose
    ├── ConfigError                a settings or job file is invalid (names file and key)
    ├── StateError                 the state folder or a database cannot be used
    │   ├── SchemaTooNewError      a database written by a newer dreaming
    │   ├── NoAgentsError          the state folder has no agents at all (a wrong path?)
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
"""

from __future__ import annotations


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


class WorkspaceFileError(StateError):
    """A file in an agent's workspace (MEMORY.md, DREAMS.md) that dreaming cannot keep
    faithfully: not UTF-8, not a regular file. That agent's night fails; nothing is rewritten."""


class NoAgentsError(StateError):
    """Nothing in the state folder or the configured sources looks like an agent: most
    likely a wrong --state-dir, which must not pass for a quiet night."""


class LockedError(StateError):
    def __init__(self, agent: str, holder: str) -> None:
        super().__init__(f"agent {agent!r} is busy: another run holds its lock ({holder})")
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
