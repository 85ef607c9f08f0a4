"""A purge leaves nothing of what it purged in a process's memory (a scheduler runs for
weeks): every cache keyed by people's words is a `text_memo` cache, a purge empties them
all, and so does the next night of a process that did not make the purge itself."""

from __future__ import annotations

import functools
import importlib
import os
import pkgutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import dreaming
from dreaming import runner, text_memo
from dreaming.app import App
from dreaming.forget import Selector, complete_pending
from dreaming.ingest import claims, salience
from dreaming.memory import memory_file
from tests.openclaw_builder import FakeOpenClaw

# Module-level caches that hold no one's words: settings, lexicons, templates, schema.
NOT_TEXT = {
    "dreaming.ingest.salience._default_lists",  # the packaged lexicon
    "dreaming.ingest.salience.default_lexicon",
    "dreaming.ingest.grouping.default_groups",
    "dreaming.ingest.grouping.lexicon_data",
    "dreaming.ingest.slots._defaults",  # the packaged slot lists
    "dreaming.ingest._slot_data.defaults",
    "dreaming.ingest.slots.default_slots",
    "dreaming.memory.capacity._features",  # feature names ("fact instruction")
    "dreaming.phases._rem_themes.excluded",  # the lexicon's dull words and small talk
    "dreaming.store.engine._template_image",  # an empty migrated database
    "dreaming.templates.default_env",  # the prompt templates
    "dreaming.report._html._env",
}

ALLERGY = "I am allergic to peanuts and tree nuts, so never order satay for me."
JOB = "I work at Acme Corp as a backend engineer on the billing team."


def module_caches() -> dict[int, tuple[list[str], functools._lru_cache_wrapper[Any]]]:
    """Every lru cache a `dreaming` module holds at its top level (its own or one it
    imported), by identity, with the names it goes by."""
    found: dict[int, tuple[list[str], functools._lru_cache_wrapper[Any]]] = {}
    for info in pkgutil.walk_packages(dreaming.__path__, "dreaming."):
        if info.name.endswith("__main__"):
            continue  # runs the CLI
        try:
            module = importlib.import_module(info.name)
        except ModuleNotFoundError as err:  # an optional extra (the fleet's queue) not installed
            assert err.name and not err.name.startswith("dreaming"), err
            continue
        for name, value in vars(module).items():
            if isinstance(value, functools._lru_cache_wrapper):
                found.setdefault(id(value), ([], value))[0].append(f"{info.name}.{name}")
    return found


def test_every_cache_of_words_is_one_a_purge_empties() -> None:
    caches = module_caches()
    names = {n for ns, _ in caches.values() for n in ns}
    assert {"dreaming.ingest.salience.assess", "dreaming.memory.memory_file._key_of"} <= names
    registered = {id(c) for c in text_memo.CACHES}
    unknown = [
        ns for key, (ns, _) in caches.items() if key not in registered and not set(ns) & NOT_TEXT
    ]
    assert not unknown, f"make these text_memo.text_cache, or list them in NOT_TEXT: {unknown}"
    stale = sorted(NOT_TEXT - names)
    assert not stale, f"NOT_TEXT names caches that are gone: {stale}"


def filled() -> dict[str, int]:
    return {
        f"{c.__module__}.{c.__qualname__}": c.cache_info().currsize
        for c in text_memo.CACHES
        if c.cache_info().currsize
    }


def night_with_three_sessions(state: Path) -> App:
    oc = FakeOpenClaw(state)
    for n, said in enumerate([ALLERGY, JOB, ALLERGY]):
        # The owner's direct chats: what the owner says is assessed (light scores it, REM
        # themes it); an unclassified session's lines would only be untrusted evidence.
        turns = [("user", said), ("assistant", "Noted.")]
        oc.session("main", f"s{n}", turns, key=f"agent:main:s{n}", chatType="direct")
    app = App.open(state, None, env={})
    runner.run(app, ["light", "rem", "deep"], None)
    memory_file.read(app.paths.memory_file("main"))
    assert salience.assess.cache_info().currsize > 0  # the night did fill them
    assert claims._extract.cache_info().currsize > 0
    assert memory_file._parse.cache_info().currsize > 0
    return app


def test_a_purge_leaves_none_of_its_text_in_the_caches(tmp_path: Path) -> None:
    app = night_with_three_sessions(tmp_path)
    try:
        runner.forget(app, "main", Selector(sessions=("s0",)), dry_run=False)
    finally:
        app.close()
    assert not filled()


def test_a_purge_by_another_process_empties_them_at_the_next_night(tmp_path: Path) -> None:
    app = night_with_three_sessions(tmp_path)
    try:
        engine = app.engine("main")
        complete_pending(engine, app.paths, "main")  # what each night does first
        assert filled(), "no purge since this process's last night: the caches stay"
        env = {k: v for k, v in os.environ.items() if not k.startswith("DREAMING_")}
        forget = ["forget", "--agent", "main", "--session", "s0"]
        subprocess.run(
            [sys.executable, "-m", "dreaming", "--state-dir", str(tmp_path), *forget],
            check=True,
            capture_output=True,
            env=env,
        )
        assert filled(), "the purge ran in another process"
        complete_pending(engine, app.paths, "main")
        assert not filled()
    finally:
        app.close()
