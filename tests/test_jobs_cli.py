"""Job files and `dreaming jobs list/run/init`: validation, triggers, next fire times, the
jobs folder over the bundled examples, runs."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import time_machine
from click.testing import CliRunner, Result

from dreaming import demo
from dreaming.cli import cli
from dreaming.config import Settings
from dreaming.errors import ConfigError
from dreaming.paths import Paths
from dreaming.scheduler import (
    JobCatalog,
    JobSource,
    Trigger,
    bundled_jobs_dir,
    crontab_weekdays,
    job_catalog,
    jobs_dir,
    load_job,
    load_jobs,
    next_fire_time,
)


def invoke(root: Path, *args: str, config: Path | None = None) -> Result:
    from dreaming.cli import _jobs, _run  # noqa: F401  (registers commands)

    base = ["--state-dir", str(root)]
    cfg = config or root / "dreaming.toml"
    if cfg.exists():
        base += ["--config", str(cfg)]
    return CliRunner().invoke(cli, [*base, *args])


def write_job(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text(f'name = "{name}"\n{body}')
    return path


def runs_rows(root: Path, agent: str) -> list[tuple[Any, ...]]:
    db = root / "dreaming" / "agents" / f"{agent}.sqlite"
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT id, job, phases, outcome FROM runs ORDER BY id").fetchall()


# -- job files ------------------------------------------------------------------------------


def test_unknown_key_names_the_file_and_the_key(tmp_path: Path) -> None:
    path = write_job(tmp_path, "bad", '[trigger]\ncron = "0 3 * * *"\ntimezon = "UTC"\n')
    with pytest.raises(ConfigError) as err:
        load_job(path)
    assert str(path) in str(err.value)
    assert "unknown key 'trigger.timezon'" in str(err.value)
    top = write_job(tmp_path, "top", 'phase = ["deep"]\n')
    with pytest.raises(ConfigError, match=r"top\.toml: unknown key 'phase'"):
        load_job(top)


def test_bad_cron_and_bad_timezone_are_errors_naming_the_file(tmp_path: Path) -> None:
    short = write_job(tmp_path, "short", '[trigger]\ncron = "0 3 * *"\n')
    with pytest.raises(ConfigError, match=r"short\.toml: key 'trigger'.*5 fields"):
        load_job(short)
    zone = write_job(tmp_path, "zone", '[trigger]\ncron = "0 3 * * *"\ntimezone = "Mars/Olympus"\n')
    with pytest.raises(ConfigError, match=r"zone\.toml: key 'trigger.timezone'.*unknown timezone"):
        load_job(zone)
    # Five fields, but not a schedule: caught when the file loads, file and key named.
    out_of_range = write_job(tmp_path, "range", '[trigger]\ncron = "61 3 * * *"\n')
    with pytest.raises(ConfigError, match=r"range\.toml: key 'trigger.cron'"):
        load_job(out_of_range)
    folder = tmp_path / "state" / "dreaming" / "jobs"
    folder.mkdir(parents=True)
    shutil.copy(out_of_range, folder / "range.toml")
    listing = invoke(tmp_path / "state", "jobs", "list")
    assert listing.exit_code == 2
    assert "range.toml: key 'trigger.cron'" in listing.stderr
    assert "Traceback" not in listing.output


@pytest.mark.parametrize(
    ("body", "key"),
    [
        ("[trigger]\ninterval_minutes = 0.0001\n", "trigger.interval_minutes"),
        ("[budget]\nmax_usd = 1e308\n", "budget.max_usd"),
        ("[budget]\ndaily_max_usd = 1e999\n", "budget.daily_max_usd"),
        ("[budget]\nmax_tokens = 1000000000000000000\n", "budget.max_tokens"),
    ],
)
def test_values_out_of_any_sane_range_are_errors(tmp_path: Path, body: str, key: str) -> None:
    """A job firing 217 times in 25 s, or a cap of 1e308 dollars, is a typo: refused at load,
    with the file and the key named."""
    path = write_job(tmp_path, "odd", body)
    with pytest.raises(ConfigError, match=rf"odd\.toml: key '{re.escape(key)}'"):
        load_job(path)


def test_a_job_without_trigger_runs_on_demand_only(tmp_path: Path) -> None:
    job = load_job(write_job(tmp_path, "later", 'phases = ["deep"]\n'))
    assert job.trigger is None
    assert next_fire_time(job.trigger) is None


def test_the_bundled_examples_load() -> None:
    jobs = {jf.job.name: jf.job for jf in load_jobs(bundled_jobs_dir())}
    assert set(jobs) == {"nightly", "promote", "capped"}
    nightly, promote, capped = jobs["nightly"], jobs["promote"], jobs["capped"]
    assert nightly.phases == ("light", "rem", "deep") and nightly.agents == "*"
    assert nightly.trigger is not None and nightly.trigger.cron == "0 3 * * *"
    fire = next_fire_time(nightly.trigger)
    assert fire is not None and (fire.hour, fire.minute) == (3, 0)  # 03:00 local time
    assert promote.trigger is None and promote.phases == ("deep",)
    assert capped.phases == ("light", "deep")
    # An example to switch on: a fresh install does not start hourly runs beside nightly.
    assert capped.enabled is False
    assert capped.trigger is not None and capped.trigger.interval_minutes == 60
    assert capped.budget.daily_max_usd is not None and 0 < capped.budget.daily_max_usd <= 0.10


def test_crontab_weekdays_follow_crontab_not_apscheduler() -> None:
    assert crontab_weekdays("*") == "*"
    assert crontab_weekdays("1-5") == "mon,tue,wed,thu,fri"
    assert crontab_weekdays("0") == crontab_weekdays("7") == "sun"
    assert crontab_weekdays("*/2") == "sun,tue,thu,sat"
    assert crontab_weekdays("5-7") == "sun,fri,sat"
    assert crontab_weekdays("Mon-Wed,fri") == "mon,tue,wed,fri"
    for bad in ("8", "5-1", "*/0", "funday"):
        with pytest.raises(ValueError):
            crontab_weekdays(bad)
    # 2026-03-08 is a Sunday: "1-5" means Monday to Friday, so the next run is Monday.
    sunday = datetime(2026, 3, 8, 12, 0, tzinfo=UTC)
    weekdays = Trigger(cron="0 3 * * 1-5", timezone="UTC")
    assert next_fire_time(weekdays, sunday) == datetime(2026, 3, 9, 3, 0, tzinfo=UTC)
    # Day of month and weekday both restricted: either one matching fires (crontab rule).
    either = Trigger(cron="0 3 13 * 5", timezone="UTC")
    assert next_fire_time(either, sunday) == datetime(2026, 3, 13, 3, 0, tzinfo=UTC)  # Friday 13
    monday_after = datetime(2026, 3, 14, 0, 0, tzinfo=UTC)
    assert next_fire_time(either, monday_after) == datetime(2026, 3, 20, 3, 0, tzinfo=UTC)


def test_the_jobs_folder_is_the_settings_one_else_the_state_one_over_the_bundled(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    # Whether the folder exists or not: the bundled examples lie under it either way.
    assert jobs_dir(Paths(state, Settings())) == state / "dreaming" / "jobs"
    assert job_catalog(Paths(state, Settings())) == JobCatalog(
        state / "dreaming" / "jobs", bundled_jobs_dir()
    )
    configured = Settings(jobs_dir=tmp_path / "elsewhere")
    assert jobs_dir(Paths(state, configured)) == tmp_path / "elsewhere"
    assert job_catalog(Paths(state, configured)).bundled == bundled_jobs_dir()
    # Pointed at the bundled folder itself (a source checkout's jobs/), it is one layer.
    assert JobCatalog.over_bundled(bundled_jobs_dir()).bundled is None


# -- jobs list -------------------------------------------------------------------------------


def test_jobs_list_json_computes_next_fire_times(tmp_path: Path) -> None:
    state = tmp_path / "state"
    folder = state / "dreaming" / "jobs"
    write_job(folder, "berlin", '[trigger]\ncron = "0 3 * * *"\ntimezone = "Europe/Berlin"\n')
    write_job(folder, "often", '[trigger]\ninterval_minutes = 90\ntimezone = "UTC"\n')
    write_job(
        folder, "manual", 'phases = ["deep"]\ndescription = "by hand"\n[budget]\nmax_usd = 0.2\n'
    )

    def listing() -> dict[str, dict[str, Any]]:
        result = invoke(state, "jobs", "list", "--json")
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        assert data["jobs_dir"] == str(folder)
        return {j["name"]: j for j in data["jobs"]}

    with time_machine.travel(datetime(2026, 3, 10, 1, 31, tzinfo=UTC), tick=False):
        jobs = listing()
    assert jobs["berlin"]["next_fire_time"] == "2026-03-10T03:00:00+01:00"
    assert jobs["berlin"]["timezone"] == "Europe/Berlin"
    assert jobs["berlin"]["trigger"] == "cron 0 3 * * * (Europe/Berlin)"
    # Intervals run on a fixed grid from 2000-01-01 UTC (01:30, 03:00, ...), whenever the
    # scheduler started, so that two schedulers fire at the same instants.
    assert jobs["often"]["next_fire_time"] == "2026-03-10T03:00:00+00:00"
    assert jobs["manual"]["next_fire_time"] is None
    assert jobs["manual"]["trigger"] == "on demand"
    assert jobs["manual"]["budget"]["max_usd"] == 0.2
    assert jobs["manual"]["phases"] == ["deep"] and jobs["manual"]["agents"] == "*"
    assert jobs["manual"]["description"] == "by hand" and jobs["manual"]["llm"] is None
    # Past 03:00 Berlin: tomorrow, and across the switch to summer time the offset follows.
    with time_machine.travel(datetime(2026, 3, 28, 4, 0, tzinfo=UTC), tick=False):
        jobs = listing()
    assert jobs["berlin"]["next_fire_time"] == "2026-03-29T03:00:00+02:00"

    text = invoke(state, "jobs", "list")
    assert text.exit_code == 0
    assert "manual: on demand" in text.stdout and "berlin: cron 0 3 * * *" in text.stdout


# -- jobs run --------------------------------------------------------------------------------


@pytest.fixture
def demo_root(tmp_path: Path) -> Path:
    root = demo.build(tmp_path / "demo")
    folder = root / "dreaming" / "jobs"
    folder.mkdir(parents=True)
    shutil.copy(bundled_jobs_dir() / "nightly.toml", folder)
    shutil.copy(bundled_jobs_dir() / "promote.toml", folder)
    write_job(folder, "mainonly", 'phases = ["light"]\nagents = ["main"]\n')
    return root


def test_jobs_run_runs_once_and_records_the_job_name(demo_root: Path) -> None:
    result = invoke(demo_root, "jobs", "run", "nightly", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["job"] == "nightly" and data["phases"] == ["light", "rem", "deep"]
    assert {r["agent"]: r["outcome"] for r in data["runs"]} == {"bob": "ok", "main": "ok"}
    assert data["agents"]["main"]["deep"]["actions"]["add"] >= 1
    for agent in ("main", "bob"):
        assert runs_rows(demo_root, agent) == [(1, "nightly", "light,rem,deep", "ok")]

    text = invoke(demo_root, "jobs", "run", "mainonly")
    assert text.exit_code == 0, text.output
    assert text.stdout.startswith("agent main: light phase")
    assert runs_rows(demo_root, "main")[-1] == (2, "mainonly", "light", "ok")
    assert len(runs_rows(demo_root, "bob")) == 1


def test_jobs_run_dry_run_writes_nothing(demo_root: Path) -> None:
    assert invoke(demo_root, "jobs", "run", "mainonly").exit_code == 0  # light: candidates
    memory = demo_root / "workspace" / "MEMORY.md"
    before_memory = memory.read_text()
    before_runs = runs_rows(demo_root, "main")
    db = demo_root / "dreaming" / "agents" / "main.sqlite"
    with sqlite3.connect(db) as conn:
        before_candidates = conn.execute("SELECT * FROM candidates ORDER BY id").fetchall()
    result = invoke(demo_root, "jobs", "run", "promote", "--agent", "main", "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["dry_run"] is True
    assert data["runs"] == [{"agent": "main", "run_id": None, "outcome": "preview"}]
    deep = data["agents"]["main"]["deep"]
    assert deep["dry_run"] is True and deep["actions"].get("add", 0) >= 1  # would promote
    assert runs_rows(demo_root, "main") == before_runs
    assert memory.read_text() == before_memory
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT * FROM candidates ORDER BY id").fetchall() == before_candidates


def test_unknown_job_and_foreign_agent_are_clean_errors(demo_root: Path) -> None:
    result = invoke(demo_root, "jobs", "run", "nope")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "dreaming: error: unknown job 'nope' (known: capped, mainonly, nightly, promote)"
    )
    foreign = invoke(demo_root, "jobs", "run", "mainonly", "--agent", "bob")
    assert foreign.exit_code == 2
    assert "job 'mainonly' does not run on bob" in foreign.stderr
    unknown_agent = invoke(demo_root, "jobs", "run", "nightly", "--agent", "carol")
    assert unknown_agent.exit_code == 2 and "unknown agent(s): carol" in unknown_agent.stderr
    assert "Traceback" not in result.output + foreign.output + unknown_agent.output


# -- the jobs folder over the bundled examples -----------------------------------------------


def listed(root: Path, *args: str) -> dict[str, dict[str, Any]]:
    result = invoke(root, "jobs", "list", "--json", *args)
    assert result.exit_code == 0, result.output
    return {j["name"]: j for j in json.loads(result.stdout)["jobs"]}


def test_one_file_in_the_jobs_folder_keeps_the_bundled_jobs(tmp_path: Path) -> None:
    root = demo.build(tmp_path / "demo")
    write_job(root / "dreaming" / "jobs", "mine", 'phases = ["light"]\nagents = ["main"]\n')
    jobs = listed(root)
    assert set(jobs) == {"capped", "mine", "nightly", "promote"}
    assert jobs["mine"]["source"] == "folder" and jobs["mine"]["overrides"] is None
    # The folder is the schedule now: the bundled nightly runs by name, but fires no more.
    assert jobs["nightly"]["scheduled"] is False and jobs["nightly"]["next_fire_time"] is None
    assert "not scheduled (the jobs folder has its own" in invoke(root, "jobs", "list").stdout
    assert jobs["nightly"]["source"] == "bundled"
    assert jobs["nightly"]["file"] == str(bundled_jobs_dir() / "nightly.toml")
    # What used to answer "unknown job 'nightly'":
    result = invoke(root, "jobs", "run", "nightly", "--agent", "main", "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["job"] == "nightly"
    text = invoke(root, "jobs", "list").stdout
    assert f"from: bundled example {bundled_jobs_dir() / 'nightly.toml'}" in text
    assert f"from: {root / 'dreaming' / 'jobs' / 'mine.toml'}\n" in text


def test_a_folder_job_replaces_the_bundled_one_of_its_name(tmp_path: Path) -> None:
    root = demo.build(tmp_path / "demo")
    folder = root / "dreaming" / "jobs"
    folder.mkdir(parents=True)
    # Another file name, the same job name: the file says what runs, whole (no key merge).
    (folder / "my-night.toml").write_text(
        'name = "nightly"\nphases = ["light"]\n[budget]\nmax_usd = 0.002\n'
    )
    nightly = listed(root)["nightly"]
    assert nightly["source"] == "folder" and nightly["file"] == str(folder / "my-night.toml")
    assert nightly["overrides"] == str(bundled_jobs_dir() / "nightly.toml")
    assert nightly["trigger"] == "on demand" and nightly["budget"]["daily_max_usd"] is None
    text = invoke(root, "jobs", "list").stdout
    assert "my-night.toml (replaces the bundled example)" in text
    assert "budget: $0.002 a run" in text  # not rounded to $0.00
    result = invoke(root, "jobs", "run", "nightly", "--agent", "main", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["phases"] == ["light"]
    assert runs_rows(root, "main") == [(1, "nightly", "light", "ok")]


def test_enabled_false_switches_a_bundled_job_off(tmp_path: Path) -> None:
    root = demo.build(tmp_path / "demo")
    write_job(root / "dreaming" / "jobs", "capped", "enabled = false\n")
    capped = listed(root)["capped"]
    assert capped["enabled"] is False and capped["next_fire_time"] is None
    assert capped["overrides"] == str(bundled_jobs_dir() / "capped.toml")
    assert "capped: switched off (enabled = false)" in invoke(root, "jobs", "list").stdout
    result = invoke(root, "jobs", "run", "capped")
    assert result.exit_code == 2
    assert "job 'capped' is switched off: enabled = false in" in result.stderr
    assert runs_rows_or_none(root, "main") is None


def runs_rows_or_none(root: Path, agent: str) -> list[tuple[Any, ...]] | None:
    db = root / "dreaming" / "agents" / f"{agent}.sqlite"
    return runs_rows(root, agent) if db.exists() else None


def test_a_broken_folder_file_keeps_a_bundled_job_from_standing_in(tmp_path: Path) -> None:
    # The broken file may be the user's replacement of `promote`: running the example in
    # its place would do what they said not to. Their own jobs still run.
    root = demo.build(tmp_path / "demo")
    folder = root / "dreaming" / "jobs"
    write_job(folder, "mine", 'phases = ["light"]\nagents = ["main"]\n')
    (folder / "promote.toml").write_text('name = "promote"\nphases = ["dream"]\n')
    result = invoke(root, "jobs", "run", "promote", "--dry-run")
    assert result.exit_code == 2
    assert "job 'promote' would be the bundled example, but files in" in result.stderr
    assert "promote.toml: key 'phases.0'" in result.stderr
    assert invoke(root, "jobs", "run", "mine").exit_code == 0


def test_jobs_without_a_subcommand_lists_them(tmp_path: Path) -> None:
    root = demo.build(tmp_path / "demo")
    bare = invoke(root, "jobs", "--json")
    assert bare.exit_code == 0, bare.output
    assert {j["name"] for j in json.loads(bare.stdout)["jobs"]} == set(listed(root))
    assert invoke(root, "jobs").stdout.startswith("jobs in ")
    misplaced = invoke(root, "jobs", "--json", "list")
    assert misplaced.exit_code == 2 and "--json goes after the subcommand" in misplaced.stderr


# -- jobs init ---------------------------------------------------------------------------------


def test_jobs_init_copies_the_examples_and_never_overwrites_without_force(
    tmp_path: Path,
) -> None:
    root = demo.build(tmp_path / "demo")
    folder = root / "dreaming" / "jobs"
    first = invoke(root, "jobs", "init")
    assert first.exit_code == 0, first.output
    for name in ("capped", "nightly", "promote"):
        assert f"   wrote {folder / name}.toml" in first.stdout
        assert (folder / f"{name}.toml").read_text() == (
            bundled_jobs_dir() / f"{name}.toml"
        ).read_text()
    jobs = listed(root)
    assert {j["source"] for j in jobs.values()} == {"folder"}  # the copies replace them
    assert jobs["nightly"]["overrides"] == str(bundled_jobs_dir() / "nightly.toml")

    edited = (folder / "nightly.toml").read_text().replace('"0 3 * * *"', '"30 4 * * *"')
    (folder / "nightly.toml").write_text(edited)
    # A job the user named in a file of their own is not copied beside it (two files
    # naming one job is an error).
    (folder / "promote.toml").unlink()
    (folder / "deep-now.toml").write_text('name = "promote"\nphases = ["deep"]\n')
    again = invoke(root, "jobs", "init", "--json")
    assert again.exit_code == 0, again.output
    files = {Path(f["path"]).name: f for f in json.loads(again.stdout)["files"]}
    assert files["nightly.toml"]["outcome"] == "kept"
    assert "--force" in files["nightly.toml"]["reason"]
    assert files["promote.toml"]["outcome"] == "kept"
    assert files["promote.toml"]["reason"] == f"job defined by {folder / 'deep-now.toml'}"
    assert (folder / "nightly.toml").read_text() == edited
    assert not (folder / "promote.toml").exists()

    forced = invoke(root, "jobs", "init", "--force")
    assert forced.exit_code == 0, forced.output
    assert f"replaced {folder / 'nightly.toml'}" in forced.stdout
    assert (folder / "nightly.toml").read_text() == (
        bundled_jobs_dir() / "nightly.toml"
    ).read_text()
    assert not (folder / "promote.toml").exists()
    assert listed(root)["promote"]["file"] == str(folder / "deep-now.toml")


def test_jobs_init_writes_to_the_settings_jobs_dir(tmp_path: Path) -> None:
    root = demo.build(tmp_path / "demo")
    elsewhere = tmp_path / "my-jobs"
    config = root / "dreaming.toml"
    config.write_text(f'jobs_dir = "{elsewhere}"\n' + config.read_text())
    result = invoke(root, "jobs", "init")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in elsewhere.iterdir()) == [
        "capped.toml",
        "nightly.toml",
        "promote.toml",
    ]
    assert not (root / "dreaming" / "jobs").exists()


def test_job_sources_are_named_in_the_catalog(tmp_path: Path) -> None:
    folder = tmp_path / "jobs"
    write_job(folder, "promote", 'phases = ["deep"]\n')
    catalog = JobCatalog.over_bundled(folder)
    by_name = {jf.job.name: jf for jf in catalog.load()}
    assert by_name["promote"].source is JobSource.FOLDER
    assert by_name["nightly"].source is JobSource.BUNDLED
    assert catalog.find("promote").path == folder / "promote.toml"
    assert [jf.job.name for jf in JobCatalog(folder).load()] == ["promote"]  # no examples
