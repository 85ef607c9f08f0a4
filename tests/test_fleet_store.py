"""The PostgreSQL backend (database_url) against the per-agent SQLite files it replaces:
same schema, same night, same files, same verdicts."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text

from dreaming import demo, runner
from dreaming.app import App
from dreaming.errors import LockedError, SchemaTooNewError, StateError
from dreaming.forget import Selector
from dreaming.phases import Phase
from dreaming.store import MIGRATIONS, open_shared_engine
from dreaming.store.models import SQLModel
from dreaming.verify import verify

pytestmark = pytest.mark.postgres


def _fleet_folder(root: Path, url: str) -> Path:
    demo.build(root)
    config = root / "dreaming.toml"
    config.write_text(f'database_url = "{url}"\n' + config.read_text())
    return root


def _outputs(app: App, agents: list[str]) -> dict[str, str]:
    files: dict[str, str] = {}
    for agent in agents:
        for path in (app.paths.memory_file(agent), app.paths.dreams_file(agent)):
            files[f"{agent}/{path.name}"] = path.read_text()
        for day in sorted(app.paths.corpus_dir(agent).glob("*.txt")):
            files[f"{agent}/corpus/{day.name}"] = day.read_text()
    return files


def test_shared_database_has_every_model_table_and_column(pg_url: str) -> None:
    engine = open_shared_engine(pg_url)
    insp = inspect(engine)
    for table in SQLModel.metadata.sorted_tables:
        cols = {c["name"] for c in insp.get_columns(table.name)}
        assert cols == {c.name for c in table.columns}, table.name
    with engine.connect() as conn:
        names = [r[0] for r in conn.execute(text("SELECT name FROM schema_migrations"))]
    assert sorted(names) == sorted(n for n, _ in MIGRATIONS)
    engine.dispose()
    open_shared_engine(pg_url).dispose()  # idempotent


def test_newer_shared_database_is_refused(pg_url: str) -> None:
    engine = open_shared_engine(pg_url)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO schema_migrations VALUES ('9999_next', '2030-01-01')"))
    engine.dispose()
    with pytest.raises(SchemaTooNewError):
        open_shared_engine(pg_url)


def test_database_url_must_be_postgres(tmp_path: Path) -> None:
    with pytest.raises(StateError, match="postgresql://"):
        open_shared_engine(f"sqlite:///{tmp_path}/x.sqlite")
    with pytest.raises(StateError, match="not a database URL"):
        open_shared_engine("::nonsense")


def test_a_night_on_postgres_equals_the_same_night_on_sqlite(tmp_path: Path, pg_url: str) -> None:
    local = demo.build(tmp_path / "local")
    fleet = _fleet_folder(tmp_path / "fleet", pg_url)
    results = {}
    outputs = {}
    for name, root in (("local", local), ("fleet", fleet)):
        app = App.open(root, root / "dreaming.toml", env={})
        try:
            results[name] = [r.to_dict() for r in runner.run(app, ["light", "rem", "deep"])]
            agents = [r["agent"] for r in results[name]]
            outputs[name] = _outputs(app, agents)
            for agent in agents:
                assert verify(app.engine(agent), app.paths, agent).ok, agent
        finally:
            app.close()
    assert [r["outcome"] for r in results["fleet"]] == [r["outcome"] for r in results["local"]]
    assert outputs["fleet"] == outputs["local"]
    promoted = sum(r["phases"]["deep"]["actions"].get("add", 0) for r in results["local"])
    corpus_files = [k for k in outputs["local"] if "/corpus/" in k]
    assert promoted > 0 and len(corpus_files) > 4, (promoted, corpus_files)
    assert not (fleet / "dreaming" / "agents").exists()  # no SQLite file was made


def test_agents_share_one_database_without_seeing_each_other(tmp_path: Path, pg_url: str) -> None:
    root = _fleet_folder(tmp_path / "fleet", pg_url)
    app = App.open(root, root / "dreaming.toml", env={})
    try:
        runner.run(app, ["light", "rem", "deep"])
        agents = app.known_agents()
        assert len(agents) >= 2
        assert all(app.has_state(a) for a in agents)
        assert not app.has_state("nobody")
        # Forgetting every session of one agent leaves the others' state untouched.
        first, other = agents[0], agents[1]
        with app.engine(other).connect() as conn:
            before = conn.execute(
                text("SELECT count(*) FROM corpus_lines WHERE agent = :a"), {"a": other}
            ).scalar_one()
        report = runner.forget(
            app, first, Selector(sessions=tuple(_sessions(app, first))), dry_run=False
        ).to_dict()
        assert report["sessions"]
        with app.engine(other).connect() as conn:
            after = conn.execute(
                text("SELECT count(*) FROM corpus_lines WHERE agent = :a"), {"a": other}
            ).scalar_one()
            left = conn.execute(
                text("SELECT count(*) FROM corpus_lines WHERE agent = :a"), {"a": first}
            ).scalar_one()
        assert after == before > 0
        assert left == 0
        assert verify(app.engine(first), app.paths, first).ok
        assert verify(app.engine(other), app.paths, other).ok
    finally:
        app.close()


def test_the_advisory_lock_excludes_a_second_run_and_dies_with_its_connection(
    tmp_path: Path, pg_url: str
) -> None:
    root = _fleet_folder(tmp_path / "fleet", pg_url)
    first = App.open(root, root / "dreaming.toml", env={})
    second = App.open(root, root / "dreaming.toml", env={})
    try:
        with first.lock("main", "nightly"):
            with pytest.raises(LockedError, match="nightly"):
                with second.lock("main", "deep"):
                    pass
            with second.lock("ops", "deep"):  # another agent is free
                pass
        with second.lock("main", "deep"):  # released on exit
            pass
        # A holder whose connection dies (a killed worker) releases the lock with it.
        holder = first.shared_engine().connect()
        holder.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _key("main")})
        with pytest.raises(LockedError):
            with second.lock("main", "deep"):
                pass
        holder.invalidate()  # closes the server connection, as a process death would
        # The server ends the dead session when it notices the hang-up, a moment later.
        with second.lock("main", "deep", wait_s=10):
            pass
    finally:
        first.close()
        second.close()


def test_a_lock_let_go_is_free_at_once(tmp_path: Path, pg_url: str) -> None:
    """A run's lock is unlocked before its session closes: the next run asking right after
    gets the agent (closing alone releases it only once the server has ended the session,
    which refused a back-to-back run now and then)."""
    root = _fleet_folder(tmp_path / "fleet", pg_url)
    first = App.open(root, root / "dreaming.toml", env={})
    second = App.open(root, root / "dreaming.toml", env={})
    try:
        for _ in range(30):
            with first.lock("main", "nightly"):
                pass
            with second.lock("main", "deep"):
                pass
    finally:
        first.close()
        second.close()


def _sessions(app: App, agent: str) -> list[str]:
    with app.engine(agent).connect() as conn:
        rows = conn.execute(
            text("SELECT DISTINCT session_id FROM corpus_lines WHERE agent = :a"), {"a": agent}
        )
        return [r[0] for r in rows]


def _key(agent: str) -> int:
    from dreaming.store.engine import advisory_key

    return advisory_key(agent)


def test_runs_survive_the_server_dropping_idle_pooled_connections(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dreaming.store import engine as engine_mod

    monkeypatch.setattr(engine_mod, "_IDLE_PING_S", 0.0)  # any idle connection is checked
    root = _fleet_folder(tmp_path / "fleet", pg_url)
    app = App.open(root, root / "dreaming.toml", env={})
    admin = create_engine(pg_url)
    try:
        assert {r.outcome for r in runner.run(app, ["light"])} == {"ok"}
        # As a server restart would: every connection of this app's pool is cut.
        with admin.connect() as conn:
            killed = conn.execute(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            ).scalar_one()
        assert killed >= 1
        assert {r.outcome for r in runner.run(app, ["light", "rem", "deep"])} == {"ok"}
        assert all(verify(app.engine(a), app.paths, a).ok for a in app.known_agents())
    finally:
        admin.dispose()
        app.close()


def _cut_lock_sessions(url: str, agent: str) -> int:
    admin = create_engine(url)
    try:
        with admin.connect() as conn:
            return int(
                conn.execute(
                    text(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        "WHERE application_name LIKE :n"
                    ),
                    {"n": f"dreaming {agent} %"},
                ).scalar_one()
            )
    finally:
        admin.dispose()


def test_a_run_whose_lock_session_dies_stops_at_the_next_phase(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dreaming.errors import LockLostError
    from dreaming.phases.light import LightPhase

    root = _fleet_folder(tmp_path / "fleet", pg_url)
    app = App.open(root, root / "dreaming.toml", env={})
    other = App.open(root, root / "dreaming.toml", env={})
    real_run = LightPhase.run

    def light_then_lose_the_lock(self: LightPhase, agent: str, files: object) -> object:
        summary = real_run(self, agent, files)  # type: ignore[arg-type]
        assert _cut_lock_sessions(pg_url, agent) == 1  # as a failover or idle timeout would
        return summary

    monkeypatch.setattr(LightPhase, "run", light_then_lose_the_lock)
    try:
        with pytest.raises(LockLostError, match="lost its lock"):
            runner.run_agent(app, "main", list(Phase))
        with app.engine("main").connect() as conn:
            outcome, phases_done = conn.execute(
                text("SELECT outcome, summary FROM runs WHERE agent = 'main'")
            ).one()
        assert outcome == "failed" and '"rem"' not in phases_done  # REM never ran
        monkeypatch.setattr(LightPhase, "run", real_run)
        with other.lock("main", "next"):  # the agent is free for the next run
            pass
    finally:
        app.close()
        other.close()
