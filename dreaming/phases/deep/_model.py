"""The model as deep's decider: a batch shown under opaque ids, the model asked (and asked
once more, with the problems shown, when its reply does not validate), and its decisions
turned back into keys for code to apply.

A batch the model cannot decide (over budget, unreachable, failing, or invalid twice) comes
back as None: the phase then decides it deterministically or leaves it waiting.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import Connection

from dreaming.errors import (
    BudgetExceededError,
    EndpointDownError,
    InvalidReplyError,
    LLMError,
    TransientError,
)
from dreaming.ingest.slots import Slots, default_slots
from dreaming.ingest.tags import TagRegistry
from dreaming.llm import CallRecord, Completion, calls_of
from dreaming.llm.calls import LLMAccess
from dreaming.memory import lineage
from dreaming.memory.decisions import (
    Action,
    BatchInvalid,
    DecisionReply,
    PromptCandidate,
    PromptEntry,
    ValidDecision,
    render_prompt,
    reply_schema,
    validate,
)
from dreaming.memory.sanitize import sanitize_entry_text
from dreaming.phases.deep._selection import (
    Candidate,
    day,
    related_entries,
    same_slot,
    snippets,
)
from dreaming.phases.deep._summary import DeepSummary

if TYPE_CHECKING:
    from dreaming.llm import LLMClient

# Records a batch's calls (and their cost in the summary): the phase's `_log_calls`.
CallLogger = Callable[[str, Sequence[CallRecord], DeepSummary], None]


@dataclass(frozen=True)
class Exchange:
    """One batch as the model sees it. Opaque per-call ids: the model never sees a key, a
    session or a line reference."""

    candidates: dict[str, Candidate]  # c1, c2, ... -> the candidate
    entries: dict[str, str]  # e1, e2, ... -> the related entry's key
    shown_candidates: list[PromptCandidate]
    shown_entries: list[PromptEntry]

    @classmethod
    def of(
        cls,
        conn: Connection,
        agent: str,
        batch: Sequence[Candidate],
        per_candidate: int,
        slots: Slots | None = None,
    ) -> Exchange:
        related = related_entries(conn, agent, batch, per_candidate)
        # The live entries each candidate would replace were it the later statement (the
        # same slot with another value, or an explicit correction): shown beside it, found
        # by slot, since "We moved to Bristol" shares no word with "I live in Leeds".
        mates = same_slot(conn, agent, batch, slots or default_slots())
        for key, text in (kt for found in mates.values() for kt in found):
            if all(key != k for k, _ in related):
                related.append((key, text))
        ids = {key: f"e{i}" for i, (key, _) in enumerate(related, 1)}
        shown = [
            PromptCandidate(
                f"c{i}",
                c.text,
                c.sessions,
                c.days,
                snippets(conn, c.id),
                said_by=c.said_by,
                date=day(c.first_seen),
                last_date=day(c.last_seen),
                features=tuple(c.features.split()),
                same_slot=tuple(ids[k] for k, _ in mates.get(c.id, ())),
            )
            for i, c in enumerate(batch, 1)
        ]
        return cls(
            candidates={f"c{i}": c for i, c in enumerate(batch, 1)},
            entries={f"e{i}": key for i, (key, _) in enumerate(related, 1)},
            shown_candidates=shown,
            shown_entries=[PromptEntry(f"e{i}", t) for i, (_, t) in enumerate(related, 1)],
        )


class ModelDecider:
    """Asks the model for a batch's decisions, and remembers for the run why it could not:
    `unavailable` once the endpoint failed for good (no more calls this run), else
    `last_failure`, the model's latest other failure."""

    def __init__(
        self,
        access: LLMAccess,
        *,
        max_chars: int,
        registry: TagRegistry,
        log_calls: CallLogger,
    ) -> None:
        self.access = access
        self.max_chars = max_chars
        self.registry = registry
        self.log_calls = log_calls
        self.unavailable: str | None = None
        self.last_failure: str | None = None
        self._client: LLMClient | None = None

    def client(self) -> LLMClient:
        """The run's client, made when the model is first asked, kept until `close`."""
        if self._client is None:
            self._client = self.access.client_factory()
        return self._client

    def close(self) -> None:
        """Close the run's client; a later run makes its own."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def decide(
        self, agent: str, exchange: Exchange, summary: DeepSummary, retire_room: int
    ) -> list[lineage.Applied] | None:
        """The batch's decisions, or None when the model could not give valid ones."""
        error: str | None = None
        for _attempt in range(2):  # one re-ask with the problems shown, then the fallback
            system, user = render_prompt(
                exchange.shown_candidates, exchange.shown_entries, previous_error=error
            )
            try:
                completion = self._ask(agent, system, user, summary)
            except InvalidReplyError as err:
                # A reply that is not even the schema's shape: re-ask once, like any other
                # reply that does not validate.
                error = self.last_failure = str(err)
                summary.fallbacks.append(f"invalid: {err}")
                continue
            if completion is None:
                return None
            self.log_calls(agent, completion.calls, summary)
            try:
                valid = self._checked(completion.parsed, exchange, retire_room)
            except BatchInvalid as err:
                error = self.last_failure = f"decisions that did not validate: {err}"
                summary.fallbacks.append(f"invalid: {err}")
                continue
            return [self._applied(v, exchange) for v in valid]
        return None

    def _ask(
        self, agent: str, system: str, user: str, summary: DeepSummary
    ) -> Completion[DecisionReply] | None:
        """The model's reply; None when it cannot decide this batch (over budget, or the
        endpoint failing); InvalidReplyError, after its calls are logged, for a reply not
        of the schema's shape."""
        try:
            return self.client().complete_json(
                system,
                user,
                reply_schema(),
                "memory_decisions",
                DecisionReply,
                budget=self.access.budget,
            )
        except BudgetExceededError as err:
            self.log_calls(agent, calls_of(err), summary)
            summary.ended_on_budget = True
            summary.fallbacks.append(f"budget: {err}")
            return None
        except InvalidReplyError as err:
            self.log_calls(agent, calls_of(err), summary)
            raise
        except (TransientError, EndpointDownError) as err:
            # Retries did not cure it (or an earlier call's failure opened the run's
            # breaker): no more calls this run; the rest go as on_llm_failure says.
            self.log_calls(agent, calls_of(err), summary)
            self.unavailable = str(err)
            summary.fallbacks.append(f"llm: {err}")
            return None
        except LLMError as err:
            self.log_calls(agent, calls_of(err), summary)
            self.last_failure = str(err)
            summary.fallbacks.append(f"llm: {err}")
            return None

    def _checked(
        self, reply: DecisionReply, exchange: Exchange, retire_room: int
    ) -> list[ValidDecision]:
        """The reply's decisions if they validate against what was shown, leave an entry
        text once cleaned, and retire no more entries than the run has room for; else
        BatchInvalid, worded for the model."""
        valid = validate(
            reply,
            list(exchange.candidates),
            list(exchange.entries),
            max_chars=self.max_chars,
            registry=self.registry,
        )
        hollow = [
            f"{v.candidate}: the entry text is empty once markup is removed"
            for v in valid
            if v.action is not Action.SKIP and not self._clean(v.text)
        ]
        if hollow:
            raise BatchInvalid(hollow)
        retiring = sum(len(v.targets) for v in valid)
        if retiring > max(retire_room, 0):
            raise BatchInvalid(
                [
                    f"the batch retires {retiring} entries but at most"
                    f" {max(retire_room, 0)} more may be retired in this run;"
                    " merge or supersede fewer entries"
                ]
            )
        return valid

    def _applied(self, v: ValidDecision, exchange: Exchange) -> lineage.Applied:
        """A valid decision back in key space."""
        cands = exchange.candidates
        return lineage.Applied(
            candidate_id=cands[v.candidate].id,
            candidate_key=cands[v.candidate].key,
            action=v.action,
            targets=tuple(exchange.entries[t] for t in v.targets),
            # Validated text has no markers or metadata; sanitizing folds it to one
            # paragraph, as every entry is (invariant 7).
            text=self._clean(v.text),
            path="llm",
            reason=v.reason or None,
            also=tuple((cands[o].id, cands[o].key) for o in v.also),
        )

    def _clean(self, text: str | None) -> str | None:
        if text is None:
            return None
        return sanitize_entry_text(text, max_chars=self.max_chars, registry=self.registry)
