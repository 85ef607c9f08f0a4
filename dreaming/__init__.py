"""dreaming: memory consolidation for AI agents.

The library API: open a state folder (`App.open`), run phases over its agents (`run`),
forget sessions (`forget_sessions` with a `Selector`; `dreaming.forget` is the package
that does it), and the errors all of it raises. Names load on first use, so
`import dreaming` stays cheap for the CLI and the scheduler.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# name -> the module that defines it (under that name, or the one after a colon)
_EXPORTS = {
    "App": "dreaming.app",
    "AgentResult": "dreaming.runner",
    "Outcome": "dreaming.runner",
    "Phase": "dreaming.phases",
    "run": "dreaming.runner",
    "run_agent": "dreaming.runner",
    "forget_sessions": "dreaming.runner_forget:forget",
    "Selector": "dreaming.forget",
    "Settings": "dreaming.config",
    **{
        name: "dreaming.errors"
        for name in (
            "DreamingError",
            "ConfigError",
            "StateError",
            "SchemaTooNewError",
            "StorageError",
            "WorkspaceFileError",
            "NoAgentsError",
            "NoSuchError",
            "LockedError",
            "LockLostError",
            "InputError",
            "LLMError",
            "LLMConfigError",
            "LLMRequestError",
            "TransientError",
            "EndpointDownError",
            "InvalidReplyError",
            "BudgetExceededError",
            "ExitCode",
        )
    },
}

__all__ = [
    "AgentResult",
    "App",
    "BudgetExceededError",
    "ConfigError",
    "DreamingError",
    "EndpointDownError",
    "ExitCode",
    "InputError",
    "InvalidReplyError",
    "LLMConfigError",
    "LLMError",
    "LLMRequestError",
    "LockLostError",
    "LockedError",
    "NoAgentsError",
    "NoSuchError",
    "Outcome",
    "Phase",
    "SchemaTooNewError",
    "Selector",
    "Settings",
    "StateError",
    "StorageError",
    "TransientError",
    "WorkspaceFileError",
    "__version__",
    "forget_sessions",
    "run",
    "run_agent",
]

if TYPE_CHECKING:
    from dreaming.app import App
    from dreaming.config import Settings
    from dreaming.errors import (
        BudgetExceededError,
        ConfigError,
        DreamingError,
        EndpointDownError,
        ExitCode,
        InputError,
        InvalidReplyError,
        LLMConfigError,
        LLMError,
        LLMRequestError,
        LockedError,
        LockLostError,
        NoAgentsError,
        NoSuchError,
        SchemaTooNewError,
        StateError,
        StorageError,
        TransientError,
        WorkspaceFileError,
    )
    from dreaming.forget import Selector
    from dreaming.phases import Phase
    from dreaming.runner import AgentResult, Outcome, run, run_agent
    from dreaming.runner_forget import forget as forget_sessions


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dreaming' has no attribute {name!r}")
    module, _, attr = module.partition(":")
    value = getattr(importlib.import_module(module), attr or name)
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
