"""A purge leaves nothing of what it purged in this process's memory (a scheduler runs for
weeks): every cache keyed by people's words is a `text_memo` cache, and a purge empties them
all."""

from __future__ import annotations

import functools
import importlib
import pkgutil
from pathlib import Path

import dreaming
from dreaming import runner, text_memo
from dreaming.app import App
from dreaming.forget import Selector
from dreaming.ingest import claims, salience
from dreaming.memory import memory_file
from tests.openclaw_builder import FakeOpenClaw

# Module-level caches that hold no one's words: settings, lexicons, templates, schema.
NOT_TEXT = {
    "dreaming.ingest.salience._default_lists",  # the packaged lexicon
    "dreaming.ingest.salience.default_lexicon",
    "dreaming.ingest.grouping.default_groups",
    "dreaming.ingest.slots._defaults",  # the packaged slot lists
    "dreaming.ingest.slots.default_slots",
    "dreaming.memory.capacity._features",  # feature names ("fact instruction")
    "dreaming.store.engine._template_image",  # an empty migrated database
    "dreaming.templates.default_env",  # the prompt templates
    "dreaming.report._html._env",
}

ALLERGY = "I am allergic to peanuts and tree nuts, so never order satay for me."
JOB = "I work at Acme Corp as a backend engineer on the billing team."


def module_caches() -> dict[str, functools._lru_cache_wrapper[object]]:
    """Every lru cache a `dreaming` module holds at its top level, by qualified name."""
    found: dict[str, functools._lru_cache_wrapper[object]] = {}
    for info in pkgutil.walk_packages(dreaming.__path__, "dreaming."):
        if info.name.endswith("__main__"):
            continue  # runs the CLI
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra (the fleet's PostgreSQL queue) not installed
            continue
        for name, value in vars(module).items():
            if isinstance(value, functools._lru_cache_wrapper) and value.__module__ == info.name:
                found[f"{info.name}.{name}"] = value
    return found


def test_every_cache_of_words_is_one_a_purge_empties() -> None:
    caches = module_caches()
    assert "dreaming.ingest.salience.assess" in caches  # the walk does find them
    unknown = [
        name
        for name, cache in caches.items()
        if name not in NOT_TEXT and cache.cache_clear not in text_memo._CLEARS
    ]
    assert not unknown, f"make these text_memo.text_cache, or list them in NOT_TEXT: {unknown}"
    stale = sorted(NOT_TEXT - set(caches))
    assert not stale, f"NOT_TEXT names caches that are gone: {stale}"


def test_a_purge_leaves_none_of_its_text_in_the_caches(tmp_path: Path) -> None:
    oc = FakeOpenClaw(tmp_path)
    for n, said in enumerate([ALLERGY, JOB, ALLERGY]):
        oc.session("main", f"s{n}", [("user", said), ("assistant", "Noted.")])
    app = App.open(tmp_path, None, env={})
    try:
        runner.run(app, ["light", "rem", "deep"], None)
        memory_file.read(app.paths.memory_file("main"))
        assert salience.assess.cache_info().currsize > 0  # the night did fill them
        assert claims._extract.cache_info().currsize > 0
        assert memory_file._parse.cache_info().currsize > 0
        runner.forget(app, "main", Selector(sessions=("s0",)), dry_run=False)
    finally:
        app.close()
    full = {
        name: cache.cache_info().currsize
        for name, cache in module_caches().items()
        if cache.cache_clear in text_memo._CLEARS and cache.cache_info().currsize
    }
    assert not full, full
