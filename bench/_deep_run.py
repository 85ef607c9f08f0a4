"""One measured deep run of the deep bench, and its figures (imported from bench/)."""

from __future__ import annotations

import cProfile
import math
import shutil
import time
from pathlib import Path
from typing import Any

from _deep_data import (
    AGENT,
    Fact,
    open_app,
    write_config,
)
from _deep_model import ScriptedModel, ServerClock

from dreaming import runner
from tests.fake_openai import FakeOpenAI

# -- one measured run ----------------------------------------------------------------------


def run_once(
    base: Path,
    work: Path,
    facts: list[Fact],
    *,
    batch_size: int,
    use_llm: bool,
    profile: cProfile.Profile | None = None,
) -> dict[str, Any]:
    state = work / f"{'llm' if use_llm else 'det'}-b{batch_size}-{time.monotonic_ns()}"
    shutil.copytree(base, state)
    fake: FakeOpenAI | None = None
    clock = ServerClock()
    model = ScriptedModel(facts)
    try:
        if use_llm:
            fake = FakeOpenAI().start()
            clock.wrap_default(fake, model)
            clock.wrap_handler(fake)
            write_config(state, batch_size=batch_size, base_url=fake.base_url)
        else:
            write_config(state, batch_size=batch_size)
        app = open_app(state)
        try:
            app.engine(AGENT)  # open the database outside the timed call
            if profile is not None:
                profile.enable()
            t0 = time.perf_counter()
            summary = runner.run_deep(app, [AGENT], llm="bench" if use_llm else None)[0]
            wall = time.perf_counter() - t0
            if profile is not None:
                profile.disable()
        finally:
            app.close()
        memory_chars = len((state / "workspace" / "MEMORY.md").read_text())
    finally:
        if fake is not None:
            fake.stop()
        shutil.rmtree(state, ignore_errors=True)
    return _metrics(summary, wall, batch_size, use_llm, fake, clock, model, memory_chars)


def _per(value: float, count: int, digits: int = 2) -> float | None:
    return round(value / count, digits) if count else None


def _metrics(
    summary: dict[str, Any],
    wall: float,
    batch_size: int,
    use_llm: bool,
    fake: FakeOpenAI | None,
    clock: ServerClock,
    model: ScriptedModel,
    memory_chars: int,
) -> dict[str, Any]:
    actions = summary["actions"]
    promoted = sum(actions.get(a, 0) for a in ("add", "merge", "supersede"))
    selected = summary["selected"]
    llm = summary["llm"]
    client_s = wall - clock.reply_s
    out: dict[str, Any] = {
        "path": "llm" if use_llm else "deterministic",
        "batch_size": batch_size,
        "candidates": selected,
        "batches": summary["batches"],
        "expected_batches": math.ceil(selected / batch_size),
        "actions": actions,
        "paths": summary["paths"],
        "fallbacks": len(summary["fallbacks"]),
        "deferred": summary["deferred"],
        "promoted": promoted,
        "entries_after": summary["entries"],
        "memory_chars": memory_chars,
        "wall_s": round(wall, 3),
        "server_reply_s": round(clock.reply_s, 3),
        "wall_ex_server_s": round(client_s, 3),
        "server_handler_s": round(clock.handler_s, 3),
        "phase_duration_s": summary["duration_s"],
        "ms_per_candidate": _per(1000 * client_s, selected),
        "candidates_per_s": round(selected / client_s, 1) if client_s > 0 else None,
        "candidates_per_s_raw": round(selected / wall, 1) if wall > 0 else None,
    }
    if fake is not None:
        agree = (
            llm["calls"] == fake.completions_served
            and llm["input_tokens"] == fake.prompt_tokens
            and llm["output_tokens"] == fake.completion_tokens
        )
        out |= {
            "llm_calls": llm["calls"],
            "input_tokens": llm["input_tokens"],
            "output_tokens": llm["output_tokens"],
            "cost_usd": llm["cost_usd"],
            "fake": {
                "completions_served": fake.completions_served,
                "chat_requests": len(fake.chat_requests),
                "prompt_tokens": fake.prompt_tokens,
                "completion_tokens": fake.completion_tokens,
            },
            "counters_agree": agree,
            "model_said": dict(sorted(model.said.items())),
            "calls_per_promoted": _per(llm["calls"], promoted, 4),
            "input_tokens_per_promoted": _per(llm["input_tokens"], promoted, 1),
            "output_tokens_per_promoted": _per(llm["output_tokens"], promoted, 1),
            "input_tokens_per_call": _per(llm["input_tokens"], llm["calls"], 1),
        }
    return out
