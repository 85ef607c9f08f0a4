"""The injected-context tag registry: what plugins injected into transcripts, and its removal.

Agents' transcripts carry blocks that harnesses and plugins injected (recalled memories,
untrusted inbound metadata headers, external-content wrappers, system reminders). This
package owns recognising and removing them before anything becomes memory:

- :class:`TagDeclaration` - one producer's "I inject blocks that look like this"
  (patterns ``xml``, ``sentinel-line``, ``delimited``; scopes where it is stripped);
- :func:`build_registry` - gathers declarations from the environment, config, plugin
  manifests, runtime registration and the built-in defaults (:data:`BUILTIN_TAGS`);
- :class:`TagRegistry` - strips text for one :class:`Scope` and explains itself in a
  diagnostics banner.

The parts are private modules of this package (``_model``, ``_builtin``, ``_matcher``,
``_registry``); everything outside the package imports from here.
"""

from __future__ import annotations

from ._builtin import BUILTIN_TAGS
from ._model import ALL_SCOPES, Pattern, Producer, Scope, TagDeclaration
from ._registry import ENV_VAR, TagRegistry, build_registry

__all__ = [
    "ALL_SCOPES",
    "BUILTIN_TAGS",
    "ENV_VAR",
    "Pattern",
    "Producer",
    "Scope",
    "TagDeclaration",
    "TagRegistry",
    "build_registry",
]
