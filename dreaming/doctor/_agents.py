"""The checks of what runs would do per agent: one writer per MEMORY.md, the caps, the LLM
endpoint, and each agent's `verify`."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from sqlalchemy.exc import SQLAlchemyError

from dreaming.app import App
from dreaming.config import Settings
from dreaming.doctor._findings import Diagnosis, Level, names
from dreaming.errors import DreamingError, LLMConfigError
from dreaming.memory import capacity
from dreaming.messages import SessionFile
from dreaming.paths import Paths
from dreaming.verify import Verdict, verify, verify_without_state

SHOWN_VIOLATIONS = 2  # of an agent's verify violations, in its one line
VERIFY_FIX = "see `dreaming verify`"


def check_coexist(d: Diagnosis, paths: Paths, agents: list[str]) -> None:
    """One writer per MEMORY.md: agents whose memory OpenClaw's own dreaming consolidates."""
    clear: list[str] = []
    for agent in agents:
        owner = paths.dreaming_owner(agent)
        if owner is None:
            clear.append(agent)
        elif paths.not_written(agent) is None:  # [openclaw] coexist = "write"
            d.add(
                "coexist",
                Level.WARN,
                f"{owner.plugin} dreaming also consolidates agent {agent} ({owner.because} in"
                f' {owner.file}) and [openclaw] coexist = "write": two writers on one MEMORY.md',
                f'set {owner.change} in {owner.file}, or coexist = "refuse" in dreaming.toml',
                agent,
            )
        else:
            d.add(
                "coexist",
                Level.WARN,
                f"agent {agent}: MEMORY.md and DREAMS.md not written: {owner.plugin} dreaming"
                f" consolidates it ({owner.because} in {owner.file}); its nights run light only",
                f'set {owner.change} in {owner.file}, or [openclaw] coexist = "write" in'
                " dreaming.toml to write them as well",
                agent,
            )
    if clear:
        d.add(
            "coexist",
            Level.OK,
            f"dreaming is the one writer of MEMORY.md for {names(clear, 'agent')}",
        )


def check_caps(d: Diagnosis, paths: Paths, openclaw_agents: list[str]) -> None:
    _budget(d, paths.settings)
    # (budget, what set it, what OpenClaw loads) -> agents
    by_limit: dict[tuple[int | None, str, int], list[str]] = defaultdict(list)
    for agent in openclaw_agents:
        limit = paths.bootstrap_max_chars(agent)
        budget = paths.capacity(agent)
        by_limit[(budget.max_chars, budget.chars_from, limit)].append(agent)
        _memory_size(d, paths, agent, limit)
    for (cap, origin, limit), agents in sorted(by_limit.items(), key=lambda kv: kv[0][2]):
        if cap is None or cap > limit:
            allowed = "no bound" if cap is None else f"{origin} = {cap}"
            d.add(
                "caps",
                Level.WARN,
                f"{allowed} lets MEMORY.md grow past the {limit} characters OpenClaw loads"
                f" of it (bootstrapMaxChars) for {names(agents, 'agent')}: OpenClaw cuts the"
                " middle of a longer file",
                f"remove {origin} from dreaming.toml (the budget is then bootstrapMaxChars),"
                f" set it to {limit}, or raise bootstrapMaxChars in openclaw.json",
            )
        else:
            d.add(
                "caps",
                Level.OK,
                f"MEMORY.md stays within the {limit} characters OpenClaw loads for"
                f" {names(agents, 'agent')} (budget {cap}, from {origin})",
            )


def _budget(d: Diagnosis, settings: Settings) -> None:
    name = settings.deep.llm
    if name is None:
        d.add("caps", Level.OK, "no [deep] llm: the deterministic path spends nothing")
        return
    profile = settings.llm.profiles[name]
    b = settings.budget
    usd = (b.max_usd, b.daily_max_usd)
    counted = (b.max_tokens, b.max_calls, b.daily_max_tokens)
    if all(c is None for c in (*usd, *counted)):
        d.add(
            "caps",
            Level.WARN,
            f"[deep] llm = {name!r} but no [budget]: what a run spends on the model is unbounded",
            "set [budget] max_usd (per run) and daily_max_usd (per agent and day), or"
            " max_tokens / max_calls",
        )
    elif all(c is None for c in counted) and not profile.has_price:
        d.add(
            "caps",
            Level.FAIL,
            f"the budget is in USD only but profile {name!r} has no price: every call is"
            " refused before it is sent",
            f"set price_input_per_mtok and price_output_per_mtok under [llm.profiles.{name}],"
            " or a max_tokens / max_calls budget",
        )
    else:
        caps = [f"{k} = {v}" for k, v in b.model_dump().items() if v is not None]
        d.add("caps", Level.OK, f"LLM spend is capped: {', '.join(caps)}")


def _memory_size(d: Diagnosis, paths: Paths, agent: str, limit: int) -> None:
    """MEMORY.md counted as OpenClaw counts what it loads (`capacity.measure`: UTF-16 code
    units, so an emoji is two; a CRLF file's carriage returns too), as `status` shows it."""
    try:
        path = paths.memory_file(agent)
        text = path.read_bytes().decode("utf-8") if path.is_file() else ""
        size, _ = capacity.measure(text)  # the raw text: its "\r"s are in it
    except (DreamingError, OSError, UnicodeDecodeError) as err:
        d.add("caps", Level.FAIL, f"agent {agent}: MEMORY.md cannot be read: {err}", None, agent)
        return
    if size > limit:
        d.add(
            "caps",
            Level.WARN,
            f"agent {agent}: {path} has {size} characters; OpenClaw loads {limit} and cuts"
            " the middle",
            "shorten the operator text in it, or raise bootstrapMaxChars in openclaw.json"
            " (dreaming archives entries to stay within its budget, but never cuts your text)",
            agent,
        )


def check_endpoint_of(
    d: Diagnosis, settings: Settings, env: Mapping[str, str], *, llm: bool, timeout_s: float | None
) -> None:
    name = settings.deep.llm
    if name is None:
        if llm:
            d.add("endpoint", Level.OK, "no [deep] llm: no endpoint to try")
        return
    profile = settings.llm.profiles[name]
    if profile.api_key_env and not env.get(profile.api_key_env):
        d.add(
            "endpoint",
            Level.FAIL,
            f"profile {name!r}: {profile.api_key_env} is not set, so no call can be made",
            f"export {profile.api_key_env} where dreaming runs (the scheduler's and cron's"
            ' environment too), or api_key_env = "" for a server that needs no key',
        )
        return
    where = f"profile {name!r} ({profile.model} at {profile.base_url})"
    if not llm:
        d.add("endpoint", Level.OK, f"{where}: not tried (--llm sends one small request)")
        return
    from dreaming.llm.check import check_endpoint  # the HTTP stack loads only for this

    try:
        result = check_endpoint(profile, env=env, timeout_s=timeout_s)
    except LLMConfigError as err:
        d.add("endpoint", Level.FAIL, f"{where}: {err}", "correct the profile")
        return
    if result.ok:
        d.add(
            "endpoint",
            Level.OK,
            f"{where} answered in {result.latency_s:.2f}s ({result.mode})",
        )
    else:
        d.add(
            "endpoint",
            Level.FAIL,
            f"{where}: {result.error}",
            f"see `dreaming llm check {name}`; check base_url, model and the key",
        )


def check_verify(d: Diagnosis, app: App, discovered: Mapping[str, list[SessionFile]]) -> None:
    """`dreaming verify` on every agent with state (and on MEMORY.md of those without)."""
    try:
        stateful = app.agents_with_state()
    except (DreamingError, SQLAlchemyError) as err:
        d.add("verify", Level.FAIL, f"cannot list the agents' state: {err}", VERIFY_FIX)
        return
    verdicts: list[Verdict] = []
    for agent in sorted(set(stateful) | set(discovered)):
        try:
            if agent in stateful:
                verdicts.append(verify(app.engine(agent, create=False), app.paths, agent))
            else:
                verdicts.append(verify_without_state(app.paths, agent))
        except (DreamingError, SQLAlchemyError) as err:
            message = " ".join(str(err).split())[:300]
            d.add("verify", Level.FAIL, f"agent {agent}: {message}", VERIFY_FIX, agent)
    passed = [v.agent for v in verdicts if v.ok and v.agent in stateful]
    for v in verdicts:
        if not v.ok:
            _violations(d, v)
    if passed:
        d.add("verify", Level.OK, f"verify passes for {names(passed, 'agent')}")
    elif not stateful:
        d.add("verify", Level.OK, "no agent has state yet: `dreaming run` makes it")


def _violations(d: Diagnosis, v: Verdict) -> None:
    shown = "; ".join(v.violations[:SHOWN_VIOLATIONS])
    more = len(v.violations) - SHOWN_VIOLATIONS
    extra = f" (and {more} more)" if more > 0 else ""
    d.add(
        "verify",
        Level.FAIL,
        f"agent {v.agent}: {len(v.violations)} violation(s): {shown}{extra}",
        f"`dreaming verify --agent {v.agent}` lists them with what to do; most say `run again`",
        v.agent,
    )
