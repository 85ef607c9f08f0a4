"""The deep phase's conversation with the model: reply schema, prompt rendering, validation.

The model sees a batch of candidates and related entries under opaque per-call ids (``c1``,
``e3``; DESIGN invariant 1) and answers with one :class:`DecisionItem` per candidate.
:func:`validate` checks the whole reply against what was sent and either returns
:class:`ValidDecision` values for code to apply, or raises :class:`BatchInvalid` listing
every problem, worded to be shown to the model when it is asked again.

Everything here is pure and deterministic: no I/O beyond reading the prompt templates
(found and loaded by :mod:`dreaming.templates`).
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import jinja2
from pydantic import BaseModel, ConfigDict, Field, field_validator

from dreaming.errors import InvalidReplyError
from dreaming.ingest.tags import TagRegistry
from dreaming.memory.actions import Action
from dreaming.memory.sanitize import DEFAULT_MAX_CHARS, entry_text_problems, prompt_safe
from dreaming.templates import default_env

SYSTEM_TEMPLATE = "deep_system.j2"
USER_TEMPLATE = "deep_user.j2"
MAX_EVIDENCE = 3


_NEEDS_TARGETS = frozenset({Action.MERGE, Action.SUPERSEDE})
_NEEDS_TEXT = frozenset({Action.ADD, Action.MERGE, Action.SUPERSEDE})


class DecisionItem(BaseModel):
    """The model's decision for one candidate, as it replied (not yet validated)."""

    # The docstring is for readers of this code; the schema's description is for the model.
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"description": "The decision for one candidate."}
    )

    candidate: str = Field(description="The candidate's id as shown, e.g. c1.")
    action: Action = Field(description="add, merge, supersede or skip.")
    targets: list[str] = Field(
        default_factory=list,
        description="Ids of shown entries (e.g. e2): one or more for merge and supersede, "
        "empty for add and skip.",
    )
    text: str | None = Field(
        default=None,
        description="The entry text to store for add, merge and supersede; null for skip.",
    )
    also: list[str] = Field(
        default_factory=list,
        description="Ids of other candidates (e.g. c3) whose facts this entry text also "
        "states, folded into it; empty for skip. A candidate listed here needs no decision "
        "of its own.",
    )
    reason: str = Field(
        default="", description="A few words on why; kept in the decision log, never in memory."
    )

    @field_validator("action", mode="before")
    @classmethod
    def _lower_action(cls, value: Any) -> Any:
        # json_object mode has no enum enforcement; "Add" or " skip" mean the obvious.
        return value.strip().lower() if isinstance(value, str) else value


class DecisionReply(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decisions: list[DecisionItem] = Field(description="One decision per candidate.")


def reply_schema() -> dict[str, Any]:
    """The JSON schema of :class:`DecisionReply`, self-contained and plain.

    References are inlined and titles and defaults dropped, so the schema means the same to
    every server (OpenAI strict mode, vLLM/llama.cpp grammars, or pasted into the prompt)
    and :func:`dreaming.llm.strict_schema` only has to close the objects.
    """
    raw = DecisionReply.model_json_schema()
    defs = raw.pop("$defs", {})
    plain: dict[str, Any] = _plain(raw, defs)
    return plain


def _plain(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_plain(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        name = ref.removeprefix("#/$defs/")
        merged = {**copy.deepcopy(defs[name]), **{k: v for k, v in node.items() if k != "$ref"}}
        return _plain(merged, defs)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("title", "default"):
            continue
        if key == "properties":
            out[key] = {name: _plain(sub, defs) for name, sub in value.items()}
        else:
            out[key] = _plain(value, defs)
    return out


# -- prompt --------------------------------------------------------------------------------


@dataclass(frozen=True)
class PromptCandidate:
    """A candidate as the model sees it: opaque id, claim, signals, short evidence texts.

    ``evidence`` holds up to three corpus snippets, texts only: callers strip references
    before building this, and nothing here can carry provenance.
    """

    id: str
    text: str
    sessions: int
    days: int
    evidence: list[str] = field(default_factory=list)
    said_by: str = "user"  # user | agent | user and agent: who said it, by its evidence
    date: str | None = None  # YYYY-MM-DD it was first said
    last_date: str | None = None  # YYYY-MM-DD it was last said
    features: tuple[str, ...] = ()  # the salience features that fired
    # Ids of shown entries that state another value of the same fact (the same holder and
    # relation) or that the candidate corrects outright.
    same_slot: tuple[str, ...] = ()


@dataclass(frozen=True)
class PromptEntry:
    id: str
    text: str


def _to_json(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2)


def render_prompt(
    candidates: Sequence[PromptCandidate],
    entries: Sequence[PromptEntry],
    *,
    previous_error: str | None = None,
    templates: jinja2.Environment | None = None,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> tuple[str, str]:
    """The (system, user) prompt pair for one batch.

    Candidates and entries are rendered as JSON under their opaque ids only; the JSON is
    built here, never by the template, so no text can escape its string. ``max_chars`` is
    the entry length limit :func:`validate` will enforce, stated in the system prompt.
    """
    env = templates if templates is not None else default_env()
    candidates_data = [
        {
            "id": c.id,
            "text": prompt_safe(c.text),
            "said_by": c.said_by,
            "first_said": c.date,
            "last_said": c.last_date,
            "sessions": c.sessions,
            "days": c.days,
            "signals": list(c.features),
            "evidence": [prompt_safe(e) for e in c.evidence[:MAX_EVIDENCE]],
        }
        # Only where there is one: every token of a prompt is paid for.
        | ({"same_fact_as": list(c.same_slot)} if c.same_slot else {})
        for c in candidates
    ]
    entries_data = [{"id": e.id, "text": prompt_safe(e.text)} for e in entries]
    error = previous_error.strip().rstrip(".") if previous_error else None
    context = {
        "max_chars": max_chars,
        "candidate_ids": ", ".join(c.id for c in candidates),
        "candidate_count": len(candidates),
        "entry_count": len(entries),
        "candidates_json": _to_json(candidates_data),
        "entries_json": _to_json(entries_data),
        "previous_error": prompt_safe(error) if error else None,
    }
    system = env.get_template(SYSTEM_TEMPLATE).render(context)
    user = env.get_template(USER_TEMPLATE).render(context)
    return system, user


# -- validation ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ValidDecision:
    """A decision that passed :func:`validate`: ids are among those sent, ``text`` is set
    (stripped) exactly for add/merge/supersede and ``targets`` exactly for merge/supersede."""

    candidate: str
    action: Action
    targets: tuple[str, ...]
    text: str | None
    also: tuple[str, ...] = ()
    reason: str = ""


class BatchInvalid(InvalidReplyError):  # noqa: N818  (the name the deep phase imports)
    """The reply parsed but its decisions do not fit what was sent; ``problems`` lists
    every one. The message is written to be shown to the model on a retry."""

    def __init__(self, problems: list[str]) -> None:
        count = len(problems)
        noun = "problem" if count == 1 else "problems"
        super().__init__(f"{count} {noun}: " + "; ".join(problems))
        self.problems = list(problems)


def validate(
    reply: DecisionReply,
    candidate_ids: Sequence[str],
    entry_ids: Sequence[str],
    *,
    max_chars: int = DEFAULT_MAX_CHARS,
    registry: TagRegistry | None = None,
) -> list[ValidDecision]:
    """Check every decision against the ids that were sent; raise :class:`BatchInvalid`
    with all problems, or return one :class:`ValidDecision` per candidate in the order of
    ``candidate_ids``.

    The model's text is checked, not repaired: a text that :func:`entry_text_problems`
    objects to is a problem like any other.
    """
    for label, ids in (("candidate", candidate_ids), ("entry", entry_ids)):
        dupes = sorted(i for i, n in Counter(ids).items() if n > 1)
        if dupes:
            raise ValueError(f"duplicate {label} ids sent: {', '.join(dupes)}")
    sent = set(candidate_ids)
    shown = set(entry_ids)
    problems: list[str] = []
    chosen: dict[str, DecisionItem] = {}
    duplicated: set[str] = set()

    for given in reply.decisions:
        cid = given.candidate
        if cid not in sent:
            problems.append(
                f"decision for unknown candidate {cid!r} "
                f"(the candidates are {', '.join(candidate_ids) or 'none'})"
            )
        elif cid in chosen:
            if cid not in duplicated:
                duplicated.add(cid)
                problems.append(f"{cid}: more than one decision; give exactly one")
        else:
            chosen[cid] = given

    folded = _folded(chosen, sent, problems)
    claimed: dict[str, str] = {}  # target entry -> first candidate to merge/supersede it
    valid: dict[str, ValidDecision] = {}
    for cid in candidate_ids:
        item = chosen.get(cid)
        if cid in folded:
            continue  # carried by the decision that folded it in
        if item is None:
            problems.append(f"{cid}: no decision given")
            continue
        found = _check_item(item, shown, entry_ids, max_chars, registry)
        if item.action in _NEEDS_TARGETS:
            for target in dict.fromkeys(item.targets):
                if target not in shown:
                    continue
                owner = claimed.setdefault(target, cid)
                if owner != cid:
                    found.append(
                        f"entry {target} is already a target of {owner}; an entry may be "
                        "the target of one candidate only"
                    )
        if found:
            problems += [f"{cid} ({item.action.value}): {p}" for p in found]
            continue
        needs_text = item.action in _NEEDS_TEXT
        valid[cid] = ValidDecision(
            candidate=cid,
            action=item.action,
            targets=tuple(item.targets),
            text=item.text.strip() if needs_text and item.text is not None else None,
            also=tuple(dict.fromkeys(item.also)) if needs_text else (),
            reason=" ".join(item.reason.split())[:300],
        )

    if problems:
        raise BatchInvalid(problems)
    return [valid[cid] for cid in candidate_ids if cid in valid]


def _folded(chosen: dict[str, DecisionItem], sent: set[str], problems: list[str]) -> set[str]:
    """Candidates another decision folds into its entry (`also`). Each may be folded once,
    only by an add, merge or supersede, and its own decision, if given, must be skip."""
    folded: dict[str, str] = {}
    for cid, item in chosen.items():
        for other in dict.fromkeys(item.also):
            if item.action not in _NEEDS_TEXT:
                problems.append(
                    f"{cid} ({item.action.value}): only add, merge or supersede may list also"
                )
                break
            if other not in sent:
                problems.append(f"{cid}: also names unknown candidate {other!r}")
            elif other == cid:
                problems.append(f"{cid}: also lists the decision's own candidate")
            elif other in folded:
                problems.append(
                    f"{other} is folded into both {folded[other]} and {cid}; fold it once"
                )
            else:
                folded[other] = cid
    for other, by in folded.items():
        own = chosen.get(other)
        if own is not None and (own.action is not Action.SKIP or own.also):
            problems.append(
                f"{other} is folded into {by} but has its own {own.action.value} decision;"
                " give it skip or no decision"
            )
        if other in folded.values():
            problems.append(f"{other} is folded into {by} and folds others itself")
    return set(folded)


def _check_item(
    item: DecisionItem,
    shown: set[str],
    entry_ids: Sequence[str],
    max_chars: int,
    registry: TagRegistry | None,
) -> list[str]:
    found: list[str] = []
    if item.action in _NEEDS_TARGETS:
        if not item.targets:
            found.append("needs at least one target entry id")
    elif item.targets:
        found.append(f"must have no targets, got {', '.join(item.targets)}")
    unknown = [t for t in dict.fromkeys(item.targets) if t not in shown]
    if unknown:
        shown_list = (
            f"the entries shown are {', '.join(entry_ids)}"
            if entry_ids
            else "no entries were shown"
        )
        found.append(f"unknown target {', '.join(unknown)} ({shown_list})")
    repeated = sorted(t for t, n in Counter(item.targets).items() if n > 1)
    if repeated:
        found.append(f"target {', '.join(repeated)} listed more than once")
    if item.action in _NEEDS_TEXT:
        if item.text is None or not item.text.strip():
            found.append("needs a non-empty text")
        else:
            found += entry_text_problems(item.text, max_chars=max_chars, registry=registry)
    return found


__all__ = [
    "Action",
    "BatchInvalid",
    "DecisionItem",
    "DecisionReply",
    "PromptCandidate",
    "PromptEntry",
    "ValidDecision",
    "render_prompt",
    "reply_schema",
    "validate",
]
