"""Fleet mode end to end: real `dreaming worker` processes on a real PostgreSQL, the
Procrastinate queue between them, and the guarantees docs/fleet.md promises."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import time_machine
from sqlalchemy import create_engine, text

from dreaming import runner
from dreaming.app import App
from dreaming.fleet import enqueue_job
from dreaming.scheduler import ENQUEUE_JOB_FUNC, JobScheduler, ScheduledCall, store_url
from tests.deep_helpers import decide_all
from tests.fake_openai import DEFAULT_KEY, DEFAULT_MODEL, FakeOpenAI
from tests.fleet_helpers import (
    FAST_FLEET,
    JOBS,
    agent_names,
    build_fleet,
    crash_a_worker,
    dreaming,
    overlaps,
    queue_states,
    runs,
    start_worker,
    wait_for_queue,
    workspace_files,
)
from tests.pg import PgDatabase

pytestmark = pytest.mark.postgres

AGENTS = 8


def enqueue(root: Path, job: str) -> list[dict[str, object]]:
    out = dreaming(root, "jobs", "run", job, "--executor", "procrastinate", "--json")
    return list(json.loads(out)["queued"])


def test_workers_run_a_night_like_one_machine(tmp_path: Path, pg_database: PgDatabase) -> None:
    fleet = build_fleet(tmp_path / "fleet", AGENTS, pg_database.dsn, FAST_FLEET)
    local = build_fleet(tmp_path / "local", AGENTS, None)
    workers = [start_worker(fleet, str(i)) for i in range(3)]
    try:
        for job in JOBS:
            queued = enqueue(fleet, job)
            assert [q["outcome"] for q in queued] == ["queued"] * AGENTS
        wait_for_queue(pg_database.url, len(JOBS) * AGENTS, workers)
    finally:
        for w in workers:
            w.stop()
    assert queue_states(pg_database.url) == {"succeeded": len(JOBS) * AGENTS}
    records = runs(pg_database.url)
    assert len(records) == len(JOBS) * AGENTS
    assert {r["outcome"] for r in records} == {"ok"}
    assert overlaps(records) == []
    # Every agent ran its jobs in the order they were queued, one after another.
    for agent in agent_names(AGENTS):
        assert [r["job"] for r in records if r["agent"] == agent] == list(JOBS)
    spread = {r["worker"] for r in records}
    assert len(spread) >= 2, f"all runs on one worker: {spread}"
    # The same jobs in the same order on one machine, on SQLite files, end the same.
    app = App.open(local, local / "dreaming.toml", env={})
    try:
        for job, phases in JOBS.items():
            assert {r.outcome for r in runner.run(app, phases, job=job)} == {"ok"}
    finally:
        app.close()
    fleet_files, local_files = workspace_files(fleet), workspace_files(local)
    assert len(fleet_files) > 3 * AGENTS
    assert fleet_files == local_files
    dreaming(fleet, "verify")  # exit status 0: every invariant holds


def test_a_duplicate_enqueue_is_refused_not_doubled(
    tmp_path: Path, pg_database: PgDatabase
) -> None:
    root = build_fleet(tmp_path / "fleet", 2, pg_database.dsn, FAST_FLEET)
    assert {q["outcome"] for q in enqueue(root, "nightly")} == {"queued"}
    again = enqueue(root, "nightly")
    assert {q["outcome"] for q in again} == {"skipped"}
    assert all("already waiting" in str(q["reason"]) for q in again)
    assert {q["outcome"] for q in enqueue(root, "ingest")} == {"queued"}  # another job is fine
    dreaming(root, "worker", "--drain", "--poll", "0.1")
    assert queue_states(pg_database.url) == {"succeeded": 4}
    assert {q["outcome"] for q in enqueue(root, "nightly")} == {"queued"}  # a new night


def test_two_schedulers_firing_together_enqueue_each_agent_once(
    tmp_path: Path, pg_database: PgDatabase
) -> None:
    # The fire is claimed at a travelled-to time months ago; the worker's periodic prune (real
    # time) must not count those claims as old enough to drop while the test runs.
    keep = FAST_FLEET.replace("[fleet]\n", "[fleet]\nkeep_finished_jobs_h = 1000000\n")
    root = build_fleet(tmp_path / "fleet", 4, pg_database.dsn, keep)
    (root / "jobs" / "nightly.toml").write_text(
        'name = "nightly"\nphases = ["light", "rem", "deep"]\nagents = "*"\n'
        '[trigger]\ncron = "*/10 * * * *"\ntimezone = "UTC"\n'
    )
    app = App.open(root, root / "dreaming.toml", env={})
    app.paths.home.mkdir(parents=True, exist_ok=True)  # the schedulers' own stores live here
    services = [
        JobScheduler(
            ScheduledCall(root, root / "dreaming.toml", root / "jobs", func=ENQUEUE_JOB_FUNC),
            store_url(app.paths, f"scheduler-host{i}"),
            lock_path=root / "dreaming" / "locks" / f"scheduler-host{i}.lock",
            bundled=False,  # the bundled examples' fires (capped at 11:00) are not the point
        )
        for i in (1, 2)
    ]
    fire = datetime(2026, 3, 10, 11, 0, tzinfo=UTC)
    outcomes: list[str] = []
    try:
        with time_machine.travel(datetime(2026, 3, 10, 10, 59, 59, 500000, tzinfo=UTC)):
            for service in services:
                service.start()
            for service in services:
                fires = service.run_next(timeout=120)
                assert fires is not None and [f.scheduled_at for f in fires] == [fire]
                outcomes.append(fires[0].tally())
            for service in services:
                service.shutdown()
        assert sorted(outcomes) == ["queued=4", "skipped=4"]
        # Even after the tasks ran, that fire is not enqueued again.
        dreaming(root, "worker", "--drain", "--poll", "0.1")
        # ...not even by a host that sees the instant in another time zone.
        tokyo = fire.astimezone(ZoneInfo("Asia/Tokyo"))
        late = enqueue_job(app, root / "jobs", "nightly", fire=tokyo)
        assert {r.outcome for r in late} == {"skipped"}
        assert all("already enqueued" in str(r.reason) for r in late)
    finally:
        app.close()
    assert queue_states(pg_database.url) == {"succeeded": 4}


@pytest.mark.parametrize(
    "crash_at",
    ["light.before_commit", "light.after_commit", "deep.before_commit", "memory.before_write"],
)
def test_a_killed_worker_s_job_is_retried_elsewhere_and_converges(
    tmp_path: Path, pg_database: PgDatabase, crash_at: str
) -> None:
    root = build_fleet(tmp_path / "fleet", 2, pg_database.dsn, FAST_FLEET)
    reference = build_fleet(tmp_path / "reference", 2, None)
    crash_a_worker(root, crash_at)
    died = datetime.now(UTC).replace(tzinfo=None)
    states = queue_states(pg_database.url)
    assert states.get("doing") == 1, states  # stranded with the dead worker
    rescuer = start_worker(root, "rescuer")
    try:
        wait_for_queue(pg_database.url, 2, [rescuer], timeout=60)
    finally:
        rescuer.stop()
    assert "event=stalled action=retry" in rescuer.output()
    records = runs(pg_database.url)
    assert overlaps(records) == []
    abandoned = [r for r in records if r["outcome"] == "abandoned"]
    assert len(abandoned) == 1  # the killed run, closed by the retry under the lock
    retried = [r for r in records if r["agent"] == abandoned[0]["agent"] and r["outcome"] == "ok"]
    assert retried and all(r["started_at"] >= died.replace(microsecond=0) for r in retried)
    assert {r["worker"] for r in retried} != {abandoned[0]["worker"]}
    dreaming(root, "verify")
    app = App.open(reference, reference / "dreaming.toml", env={})
    try:
        runner.run(app, JOBS["nightly"], job="nightly")
    finally:
        app.close()
    assert workspace_files(root) == workspace_files(reference)


@pytest.mark.timeout(360)  # six agents, three workers: ~60 s alone, twice that on a busy host
def test_a_fleet_budget_smaller_than_the_work_makes_exactly_the_affordable_calls(
    tmp_path: Path, pg_database: PgDatabase, fake_openai: FakeOpenAI
) -> None:
    fake_openai.default = decide_all("add")
    cap = 7
    root = build_fleet(
        tmp_path / "fleet",
        6,
        pg_database.dsn,
        FAST_FLEET
        + f"daily_max_calls = {cap}\n"
        + "[rem]\nnarrative = false\n"
        + '[deep]\nllm = "test"\nbatch_size = 1\n'
        + f'[llm.profiles.test]\nbase_url = "{fake_openai.base_url}"\nmodel = "{DEFAULT_MODEL}"\n'
        + "price_input_per_mtok = 1.0\nprice_output_per_mtok = 2.0\n",
    )
    workers = [start_worker(root, str(i), {"OPENAI_API_KEY": DEFAULT_KEY}) for i in range(3)]
    try:
        enqueue(root, "nightly")
        wait_for_queue(pg_database.url, 6, workers)
    finally:
        for w in workers:
            w.stop()
    assert fake_openai.completions_served == cap
    engine = create_engine(pg_database.url)
    try:
        with engine.connect() as conn:
            sent = conn.execute(
                text("SELECT count(*) FROM llm_calls WHERE outcome <> 'over_budget'")
            ).scalar_one()
            refused = conn.execute(
                text("SELECT count(*) FROM llm_calls WHERE outcome = 'over_budget'")
            ).scalar_one()
            ledger = conn.execute(
                text("SELECT calls, calls_reserved, usd_reserved FROM budget_ledger")
            ).one()
            spend = conn.execute(text("SELECT coalesce(sum(calls), 0) FROM spend")).scalar_one()
    finally:
        engine.dispose()
    assert sent == cap and spend == cap
    assert refused >= 1  # the work wanted more than the cap allowed
    assert (ledger[0], ledger[1]) == (cap, 0)
    assert ledger[2] == pytest.approx(0.0, abs=1e-9)  # float sums leave ~1e-19 behind
    records = runs(pg_database.url)
    assert {r["outcome"] for r in records} <= {"ok", "budget"}
    assert "budget" in {r["outcome"] for r in records}
    assert len({r["worker"] for r in records}) >= 2
    dreaming(root, "verify")
    status = json.loads(dreaming(root, "status", "--json"))
    assert status["fleet_budget"]["calls"] == status["fleet_budget"]["max_calls"] == cap
    assert status["queue"] == {"succeeded": 6}
    assert f"{cap} of {cap} calls" in dreaming(root, "status")


def test_finished_tasks_are_pruned_after_the_keep_time(
    tmp_path: Path, pg_database: PgDatabase
) -> None:
    import asyncio
    from unittest import mock

    from procrastinate import JobContext

    from dreaming.fleet import build_queue
    from dreaming.fleet._tasks import WorkerState, bind, prune_finished_jobs

    root = build_fleet(tmp_path / "fleet", 2, pg_database.dsn, FAST_FLEET)
    enqueue(root, "ingest")
    dreaming(root, "worker", "--drain", "--poll", "0.1")
    enqueue(root, "dream")  # still waiting: never pruned
    engine = create_engine(pg_database.url)
    with engine.begin() as conn:  # the ingest tasks finished 73 hours ago
        conn.execute(text("UPDATE procrastinate_events SET at = at - interval '73 hours'"))
    engine.dispose()
    app = App.open(root, root / "dreaming.toml", env={})
    queue = build_queue(app.settings)
    bind(WorkerState(app, root / "jobs", app.settings.fleet))

    async def prune() -> None:
        async with queue.open_async():
            # The task only reads context.app: the rest of a JobContext is the worker's.
            await prune_finished_jobs(mock.Mock(spec=JobContext, app=queue), 0)

    try:
        asyncio.run(prune())
    finally:
        bind(None)
        app.close()
    assert queue_states(pg_database.url) == {"todo": 2}


def test_an_agent_held_outside_the_queue_is_retried_not_lost(
    tmp_path: Path, pg_database: PgDatabase
) -> None:
    root = build_fleet(tmp_path / "fleet", 2, pg_database.dsn, FAST_FLEET + "busy_retry_s = 1\n")
    holder = App.open(root, root / "dreaming.toml", env={})
    worker = start_worker(root, "w")
    try:
        with holder.lock("a1", "operator forget"):  # e.g. a purge run by hand
            enqueue(root, "nightly")
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                skipped = [r for r in runs(pg_database.url) if r["outcome"] == "skipped"]
                if len(skipped) >= 2:  # refused, retried, refused again
                    break
                time.sleep(0.2)
            assert len(skipped) >= 2, worker.output()[-3000:]
        a1: list[str] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and "ok" not in a1:
            a1 = [r["outcome"] for r in runs(pg_database.url) if r["agent"] == "a1"]
            time.sleep(0.2)
    finally:
        worker.stop()
        holder.close()
    assert a1[-1] == "ok" and set(a1[:-1]) == {"skipped"}, a1
    # Each refusal queued one fresh task for later; every task ended, none is stranded.
    states = queue_states(pg_database.url)
    assert set(states) == {"succeeded"} and states["succeeded"] == len(a1) + 1


def test_a_dry_run_in_the_queue_does_not_displace_the_real_one(
    tmp_path: Path, pg_database: PgDatabase
) -> None:
    root = build_fleet(tmp_path / "fleet", 2, pg_database.dsn, FAST_FLEET)
    dry = dreaming(root, "jobs", "run", "nightly", "--executor", "procrastinate", "--dry-run")
    assert dry.count("queued as task") == 2
    assert {q["outcome"] for q in enqueue(root, "nightly")} == {"queued"}
    dreaming(root, "worker", "--drain", "--poll", "0.1")
    assert queue_states(pg_database.url) == {"succeeded": 4}


def test_concurrent_enqueues_of_one_fire_claim_each_agent_once(
    tmp_path: Path, pg_database: PgDatabase
) -> None:
    import threading

    root = build_fleet(tmp_path / "fleet", 4, pg_database.dsn, FAST_FLEET)
    fire = datetime(2026, 3, 10, 11, 0, tzinfo=UTC)
    outcomes: list[str] = []
    start = threading.Barrier(4)

    def scheduler() -> None:
        app = App.open(root, root / "dreaming.toml", env={})
        try:
            start.wait()
            # The same instant as another host in another time zone would see it.
            local = fire.astimezone(ZoneInfo("Asia/Tokyo"))
            outcomes.extend(
                r.outcome for r in enqueue_job(app, root / "jobs", "nightly", fire=local)
            )
        finally:
            app.close()

    threads = [threading.Thread(target=scheduler) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes).count("queued") == 4 and len(outcomes) == 16
    assert queue_states(pg_database.url) == {"todo": 4}


def test_a_stalled_task_with_a_twin_waiting_is_closed_and_the_twin_runs(
    tmp_path: Path, pg_database: PgDatabase
) -> None:
    root = build_fleet(tmp_path / "fleet", 1, pg_database.dsn, FAST_FLEET)
    crash_a_worker(root, "deep.before_commit")
    # The next fire queues the same job while the dead worker's task is still `doing`: the
    # queueing lock only covers waiting tasks, so this one is accepted.
    assert {q["outcome"] for q in enqueue(root, "nightly")} == {"queued"}
    rescuer = start_worker(root, "rescuer")
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if queue_states(pg_database.url) == {"failed": 1, "succeeded": 1}:
                break
            time.sleep(0.2)
    finally:
        rescuer.stop()
    assert queue_states(pg_database.url) == {"failed": 1, "succeeded": 1}, rescuer.output()
    assert "a twin waits" in rescuer.output()
    assert [r["outcome"] for r in runs(pg_database.url)] == ["abandoned", "ok"]
    dreaming(root, "verify")


def test_a_fire_claim_abandoned_before_its_task_was_queued_is_taken_over(
    tmp_path: Path, pg_database: PgDatabase
) -> None:
    root = build_fleet(tmp_path / "fleet", 2, pg_database.dsn, FAST_FLEET)
    fire = datetime(2026, 3, 10, 11, 0, tzinfo=UTC)
    app = App.open(root, root / "dreaming.toml", env={})
    try:
        app.shared_engine()  # the tables
        with app.shared_engine().begin() as conn:
            # Two schedulers died between claiming and enqueueing: one 20 minutes ago (a1),
            # one a moment ago (b1, whose scheduler may still be about to enqueue).
            conn.execute(
                text(
                    "INSERT INTO fleet_fires (job, agent, fire, created_at) VALUES "
                    "('nightly', 'a1', :f, now() - interval '20 minutes'), "
                    "('nightly', 'b1', :f, now())"
                ),
                {"f": fire.isoformat()},
            )
        results = {
            r.agent: r.outcome for r in enqueue_job(app, root / "jobs", "nightly", fire=fire)
        }
    finally:
        app.close()
    assert results == {"a1": "queued", "b1": "skipped"}


def test_one_worker_with_concurrency_runs_many_agents_at_once(
    tmp_path: Path, pg_database: PgDatabase
) -> None:
    root = build_fleet(tmp_path / "fleet", AGENTS, pg_database.dsn, FAST_FLEET)
    enqueue(root, "nightly")
    dreaming(root, "worker", "--drain", "--concurrency", str(AGENTS), "--poll", "0.1")
    assert queue_states(pg_database.url) == {"succeeded": AGENTS}
    records = runs(pg_database.url)
    assert {r["outcome"] for r in records} == {"ok"} and len(records) == AGENTS
    # Threads of one process: runs of different agents did overlap in time.
    starts = sorted(r["started_at"] for r in records)
    ends = sorted(r["ended_at"] for r in records)
    assert starts[-1] < ends[-1] and any(s < e for s, e in zip(starts[1:], ends, strict=False))
    dreaming(root, "verify")
