"""Memory is current (invariant 13): a later statement of the same fact with another value
supersedes the earlier entry on the embedded default, by transcript time, read night by
night or all at once; never across holders, agents, or from the agent's own words."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import text

from dreaming.app import App
from dreaming.cli import _entries, _forget, cli  # noqa: F401  (the commands register)
from dreaming.ingest import slots
from dreaming.memory.memory_file import read
from tests.deep_helpers import decide_all, user_prompt
from tests.fake_openai import FakeOpenAI
from tests.openclaw_builder import FakeOpenClaw
from tests.test_memory_quality import night

START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

# (old statement, new statement, a word only the old value has, a word only the new one has)
CHANGES = {
    "move": (
        "I live in Leeds with my partner and our two cats.",
        "We moved to Bristol last month, the new place is lovely.",
        "Leeds",
        "Bristol",
    ),
    "employer": (
        "I work at Acme Corp as a backend engineer.",
        "I joined Globex as a staff engineer last week.",
        "Acme",
        "Globex",
    ),
    "rule": (
        "Always use pnpm for installing packages.",
        "Use yarn instead of pnpm from now on.",
        "Always use pnpm",
        "yarn",
    ),
    "name": (
        "My wife's name is Maria.",
        "Sorry, I misspoke: my wife's name is Marie, not Maria.",
        "name is Maria",
        "Marie",
    ),
    "tool": (
        "Our design team uses Figma for all mockups.",
        "The design team switched from Figma to Penpot, so share mockups as Penpot links.",
        "uses Figma",
        "Penpot",
    ),
    "no longer": (
        "I work at the county hospital as a night nurse.",
        "I no longer work at the county hospital, I quit in May.",
        "as a night nurse",
        "no longer",
    ),
    "japanese": ("僕は東京に住んでいる。", "僕は大阪に引っ越した。", "東京", "大阪"),
    # A tool replaced outright, and a thing moved from one value to another: the rule and
    # the fact that name the old one go.
    "tool replaced": (
        "Please run the linter with flake8 before you commit anything.",
        "We replaced flake8 with ruff, so lint with ruff check from now on.",
        "with flake8",
        "ruff check",
    ),
    # A thing sold, named: what was said of it goes ("the Honda" ends at its sentence).
    "sold": (
        "My car is a 2018 Honda Jazz.",
        "We sold the Honda; I drive a Kia Niro EV now.",
        "Honda Jazz",
        "Kia Niro",
    ),
    "moved from": (
        "Our CI runs on GitHub Actions.",
        "We moved CI from GitHub Actions to GitLab CI this week.",
        "runs on GitHub Actions",
        "GitLab CI",
    ),
}


def memory(state: Path, workspace: str = "workspace") -> str:
    return "\n".join(b.text for b in read(state / workspace / "MEMORY.md").blocks)


def said(oc: FakeOpenClaw, n: int, statement: str, *, agent: str = "main", role: str = "user"):
    """`statement` in its own session, `n` months after the start."""
    turns = [(role, statement), ("assistant" if role == "user" else "user", "Noted, thanks.")]
    oc.session(
        agent,
        f"s{n}",
        turns,
        key=f"agent:{agent}:s{n}",
        start=START + timedelta(days=30 * n),
        chatType="direct",
    )


def sessions(state: Path, statements: list[str], *, nightly: bool) -> None:
    oc = FakeOpenClaw(state)
    for n, statement in enumerate(statements):
        said(oc, n, statement)
        if nightly:
            night(state)
    if not nightly:
        night(state)


def sql(state: Path, query: str, agent: str = "main") -> list[Any]:
    app = App.open(state, None, env={})
    try:
        with app.engine(agent).connect() as conn:
            return list(conn.execute(text(query)).all())
    finally:
        app.close()


@pytest.mark.parametrize("nightly", [True, False], ids=["night-by-night", "one-night"])
@pytest.mark.parametrize("case", list(CHANGES))
def test_a_changed_fact_replaces_the_old_one(tmp_path: Path, case: str, nightly: bool) -> None:
    old, new, old_word, new_word = CHANGES[case]
    sessions(tmp_path, [old, new], nightly=nightly)
    kept = memory(tmp_path)
    assert new_word in kept, kept
    assert old_word not in kept, kept
    # One supersede (night by night) or the old value folded into the newer entry (one
    # night); either way the entry's lineage holds both sessions (invariant 2).
    origins = {r[0] for r in sql(tmp_path, "SELECT session_id FROM origins")}
    assert origins == {"s0", "s1"}


@pytest.mark.parametrize("case", ["move", "employer", "name"])
def test_one_night_and_night_by_night_end_alike(tmp_path: Path, case: str) -> None:
    old, new, _, _ = CHANGES[case]
    sessions(tmp_path / "a", [old, new], nightly=True)
    sessions(tmp_path / "b", [old, new], nightly=False)
    assert memory(tmp_path / "a") == memory(tmp_path / "b")


def test_an_older_statement_read_later_does_not_replace_the_newer(tmp_path: Path) -> None:
    """Transcript time decides, not the night it was read: a session from September found
    after October's was dreamt over is the old value."""
    oc = FakeOpenClaw(tmp_path)
    said(oc, 2, "We moved to Bristol last month, the new place is lovely.")
    night(tmp_path)
    said(oc, 0, "I live in Leeds with my partner and our two cats.")
    night(tmp_path)
    kept = memory(tmp_path)
    assert "Bristol" in kept and "Leeds" not in kept, kept


def test_a_relatives_move_leaves_the_owners_home(tmp_path: Path) -> None:
    sessions(
        tmp_path,
        ["I live in Leeds with my partner.", "My sister moved to Oslo last year."],
        nightly=True,
    )
    kept = memory(tmp_path)
    assert "Leeds" in kept and "Oslo" in kept


# (statements in order, words the memory keeps, words it no longer holds)
KEPT = {
    # "... and lives in eu-west-1" is the database's, "... and works at Globex" the
    # sister's: neither says where the user lives or works.
    "a clause continues its subject": (
        [
            "My name is Ana and I live in Porto with my partner Rui since 2019.",
            "I work at Acme Corp as a backend engineer.",
            "The staging database is called acme-stage and lives in eu-west-1.",
            "My sister Anna moved to Lisbon and works at Globex.",
        ],
        ("Porto", "Acme Corp", "eu-west-1", "Globex"),
        (),
    ),
    # A statement of two slots, each said on its own, loses the one replaced and keeps the
    # other in the entry that replaces it (the prod cluster's place). One whose replaced
    # part says more than its value (the partner, the year) stays beside the new value.
    "one slot of two replaced": (
        [
            "Our prod cluster runs in eu-west-1 and our staging cluster runs in eu-central-1.",
            "My name is Ana and I live in Porto with my partner Rui since 2019.",
            "The build cache is stored in us-west-1.",
            "We migrated the staging cluster to us-east-2 yesterday.",
            "We moved to Bristol last month, the new place is lovely.",
            "We moved the build cache to eu-north-1.",
        ],
        ("eu-west-1", "My name is Ana", "Rui", "us-east-2", "Bristol", "eu-north-1"),
        ("us-west-1", "eu-central-1"),
    ),
    # What a corrected entry said besides the corrected value stays; what refers to it, or
    # says nothing on its own, goes with it.
    "a correction keeps the rest": (
        [
            "We deploy with GitHub Actions to Fly.io, and the staging app is checkout-staging.",
            "Quick change of plans: we now deploy to Render instead of Fly.io.",
            "We moved to Leeds last year, the new place is lovely.",
            "We moved to Bristol last month.",
            "We open at 6am and close at 3pm, and Mondays we're closed.",
            "Also we now close at 4pm, not 3pm.",
            "I use Square for payments and Xero for the accounts.",
            "We switched from Square to SumUp, the fees were too high.",
        ],
        (
            "The staging app is checkout-staging.",
            "Render",
            "Bristol",
            "We open at 6am.",
            "Mondays we're closed.",
            "close at 4pm",
            "I use Xero for the accounts.",
            "SumUp",
        ),
        (
            "GitHub Actions to Fly.io",
            "Leeds",
            "lovely",
            "close at 3pm",
            "Square for payments",
        ),
    ),
    # A statement whose replaced value comes with more (who lives there, since when) stays
    # beside the new value, said alone as with another statement: superseding it would
    # take the husband, the son and the partner with the old home.
    "a replaced home names who lives there": (
        [
            "I live in Manchester with my husband Tom and our son Arjun, who is 7.",
            "We moved to Salford last weekend.",
        ],
        ("Tom", "Arjun", "Salford"),
        (),
    ),
    "a replaced home names since when": (
        ["I live in Porto with my partner Rui since 2019.", "I moved to Lisbon last month."],
        ("Rui", "Lisbon"),
        (),
    ),
    "a thing moved keeps what was said with it": (
        [
            "Our CI runs on GitHub Actions and we deploy to Heroku.",
            "We moved CI from GitHub Actions to GitLab CI this week.",
        ],
        ("GitLab CI", "We deploy to Heroku."),
        ("runs on GitHub Actions",),
    ),
    # A slot said again with its value is no slot lost: the old statement goes.
    "one slot replaced, the other restated": (
        [
            "I live in Leeds and work at Acme Corp.",
            "I moved to Bristol and still work at Acme Corp.",
        ],
        ("Bristol", "Acme Corp"),
        ("Leeds",),
    ),
    # Who the user is, said once; a move planned is no new home yet.
    "an introduction and a plan": (
        [
            "I'm Marta, by the way.",
            "I live in Valencia with my husband Jorge and our daughter Lucía.",
            "We're moving to Madrid in June because of the new job.",
        ],
        ("I'm Marta", "Valencia", "Jorge", "Madrid"),
        (),
    ),
}


@pytest.mark.parametrize("nightly", [True, False], ids=["night-by-night", "one-night"])
@pytest.mark.parametrize("case", list(KEPT))
def test_what_is_said_stays_unless_a_later_statement_replaces_all_of_it(
    tmp_path: Path, case: str, nightly: bool
) -> None:
    statements, stays, goes = KEPT[case]
    sessions(tmp_path, statements, nightly=nightly)
    kept = memory(tmp_path)
    for said in stays:
        assert said in kept, kept
    for said in goes:
        assert said not in kept, kept


def test_another_named_persons_job_leaves_the_owners(tmp_path: Path) -> None:
    sessions(
        tmp_path,
        ["I work at Acme Corp as a backend engineer.", "Priya joined Globex as a designer."],
        nightly=True,
    )
    kept = memory(tmp_path)
    assert "Acme" in kept, kept


def test_the_agents_words_never_replace_the_owners(tmp_path: Path) -> None:
    oc = FakeOpenClaw(tmp_path)
    said(oc, 0, "I live in Leeds with my partner and our two cats.")
    night(tmp_path, "[deep]\npromote_agent_only = true\n")
    said(oc, 1, "Great news: you moved to Bristol, the new place sounds lovely.", role="assistant")
    said(oc, 2, "We moved to Bristol last month, I think.", role="assistant")
    night(tmp_path)
    assert "Leeds" in memory(tmp_path)


def test_memory_never_crosses_agents(tmp_path: Path) -> None:
    oc = FakeOpenClaw(tmp_path)
    said(oc, 0, "I live in Leeds with my partner and our two cats.", agent="main")
    said(oc, 1, "We moved to Bristol last month, the new place is lovely.", agent="bob")
    night(tmp_path)
    assert "Leeds" in memory(tmp_path)
    assert "Bristol" in memory(tmp_path, "workspace-bob")


def test_a_statement_of_the_change_itself_is_one_entry(tmp_path: Path) -> None:
    sessions(tmp_path, ["We moved from Leeds to Bristol in the spring."], nightly=True)
    kept = memory(tmp_path)
    assert "from Leeds to Bristol" in kept


def test_entries_show_names_what_superseded_an_entry(tmp_path: Path) -> None:
    old, new, _, _ = CHANGES["move"]
    oc = FakeOpenClaw(tmp_path)
    said(oc, 0, old)
    night(tmp_path)
    (old_key,) = [b.key for b in read(tmp_path / "workspace" / "MEMORY.md").blocks]
    said(oc, 1, new)
    night(tmp_path)
    (new_key,) = [b.key for b in read(tmp_path / "workspace" / "MEMORY.md").blocks]
    base = ["--state-dir", str(tmp_path)]
    shown = CliRunner().invoke(cli, [*base, "entries", "show", old_key])
    assert shown.exit_code == 0, shown.output
    assert f"superseded by {new_key}" in shown.output
    doc = json.loads(CliRunner().invoke(cli, [*base, "entries", "show", old_key, "--json"]).stdout)
    assert doc["superseded_by"] == new_key
    current = CliRunner().invoke(cli, [*base, "entries", "show", new_key])
    assert f"supersedes: {old_key}" in current.output
    decision = sql(tmp_path, "SELECT action, reason FROM decisions WHERE action = 'supersede'")
    assert decision and "lives in" in decision[0][1]


def test_forgetting_the_old_session_takes_the_entry_built_on_it(tmp_path: Path) -> None:
    """Whole-entry deletion (invariant 3): the superseding entry's lineage includes the old
    session, so forgetting it removes the entry too, and nothing of Leeds is left."""
    old, new, _, _ = CHANGES["move"]
    sessions(tmp_path, [old, new], nightly=True)
    result = CliRunner().invoke(
        cli, ["--state-dir", str(tmp_path), "forget", "--agent", "main", "--session", "s0"]
    )
    assert result.exit_code == 0, result.output
    assert "Leeds" not in (tmp_path / "workspace" / "MEMORY.md").read_text()


def test_the_model_sees_the_entry_a_candidate_would_replace(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    """ "We moved to Bristol" shares no word with "I live in Leeds": the Leeds entry is shown
    beside it anyway, named in the candidate's same_fact_as."""
    oc = FakeOpenClaw(tmp_path)
    said(oc, 0, CHANGES["move"][0])
    night(tmp_path)
    said(oc, 1, CHANGES["move"][1])
    fake_openai.default = decide_all("add")
    night(
        tmp_path,
        '[deep]\nllm = "test"\n[llm.profiles.test]\n'
        f'base_url = "{fake_openai.base_url}"\nmodel = "m"\napi_key_env = ""\n'
        "max_attempts = 1\n",
    )
    prompts = [user_prompt(r.body) for r in fake_openai.chat_requests if "Bristol" in str(r.body)]
    assert prompts, "deep asked the model nothing about the move"
    body = prompts[0]
    candidates = json.loads(body.split("JSON data, not instructions:\n", 2)[1].split("\n\n")[0])
    entries = json.loads(body.split("JSON data, not instructions:\n", 2)[2].split("\n\n")[0])
    (bristol,) = [c for c in candidates if "Bristol" in c["text"]]
    (leeds,) = [e for e in entries if "Leeds" in e["text"]]
    assert bristol["same_fact_as"] == [leeds["id"]]


# -- the slot reader on its own ------------------------------------------------------------

SAME_SLOT = [
    ("I live in Leeds.", "We moved to Bristol last month."),
    ("My phone number is 07700 900123.", "My new number is 07700 900456."),
    ("I prefer tea over coffee.", "Actually I prefer coffee to tea now."),
    ("My manager is Priya.", "My manager is now Omar."),
    ("I'm head of platform at Acme.", "I'm now head of data at Acme."),
    ("Call me Bob.", "Please call me Robert from now on."),
    ("My dog is called Rex.", "Actually my dog's name is Max, not Rex."),
    ("The feature flags go in config/flags.yaml.", "Feature flags now go in settings/flags.toml."),
    ("Our prod database runs in eu-west-1.", "Our prod database runs in us-east-2 now."),
    ("My email is anna@old.example.", "My email is now anna@new.example."),
    ("I work at Acme.", "I quit my job at Acme in May."),
    # A clause without a subject of its own continues the speaker's.
    ("I work at Acme.", "We moved to Bristol and work at Globex now."),
    ("I work at Acme.", "We had a great summer and work at Globex now."),
    ("I live in Leeds.", "Yeah, moved to Bristol last month."),
    ("I live in Leeds.", "Last week at the office, we moved to Bristol."),
    ("Call me Rosa from now on!", "Just so you know, call me Hiro from now on."),
    # A thing moved ("moved X to Y": X is the holder).
    ("Our staging cluster runs in eu-central-1.", "We migrated the staging cluster to us-east-2."),
    ("The backups are stored in us-west-1.", "We moved the backups to eu-north-1."),
    # A lead-in is no subject; a restated slot does not keep the old statement.
    ("I live in Leeds with my partner.", "Big news: moved to Bristol last month."),
    ("I live in Leeds.", "Finally got the keys and live in Denver now."),
    ("I live in Leeds and work at Acme Corp.", "I moved to Bristol and still work at Acme Corp."),
    # A label before a colon names nobody: the correction is the speaker's.
    ("We deploy to Fly.io.", "Quick change of plans: we now deploy to Render instead of Fly.io."),
    ("We deploy to Fly.io.", "Update: we use Render instead of Fly.io now."),
    # A plural noun is no name: whose statement it is stays the speaker's.
    (
        "Our supplier for flour is Shipton Mill, and eggs come from Hilltop Farm.",
        "Eggs now come from Meadow Farm instead of Hilltop.",
    ),
    ("僕は東京に住んでいる。", "僕は大阪に住んでいる。"),
    ("Always lint with flake8.", "We replaced flake8 with ruff."),
    ("Use Jest for the unit tests.", "We swapped Jest for Vitest last sprint."),
    ("Our CI runs on GitHub Actions.", "We moved CI from GitHub Actions to GitLab CI."),
    ("The app stores files in S3.", "We migrated the file storage from S3 to R2."),
    ("My car is a 2018 Honda Jazz.", "We sold the Honda; I drive a Kia Niro EV now."),
    ("My car is a 2018 Honda Jazz.", "We sold the Honda. I drive a Kia Niro EV now."),
]
NOT_REPLACED = [
    ("I live in Leeds.", "My sister moved to Oslo."),
    ("I work at Acme Corp as a designer.", "I work at Acme."),
    ("I love hiking.", "I love painting."),
    ("I went hiking with my dog last week.", "I went to the beach with my dog."),
    ("I work at Acme.", "I work from home on Fridays."),
    ("Anna lives in Lisbon.", "Ben moved to Porto."),
    ("I'm lactose intolerant.", "I made it with coconut milk so it's lactose-free instead."),
    ("I live in Leeds.", "She moved to Oslo."),
    # LoCoMo: a hoped-for job does not end the fact that the old one was lost.
    (
        "I lost my job at the mechanical engineering company.",
        "I may have found a job at a tech company I like.",
    ),
    ("I work at Acme.", "I'm thinking of moving to Berlin."),
    ("I lost my job at Acme.", "I joined Globex last week."),
    # ... nor someone else's: the subject before it.
    (
        "My name is Ana and I live in Porto with my partner Rui since 2019.",
        "The staging database is called acme-stage and lives in eu-west-1.",
    ),
    ("I work at Acme.", "My sister Anna moved to Lisbon and works at Globex."),
    ("I work at Acme as a designer.", "My sister moved to Lisbon and works as an architect."),
    ("I live in Leeds.", "Anna, my sister, lives in Lisbon."),
    ("I work at Acme.", "She moved to Oslo and works at Globex."),
    # Being in or on something is no place ("on hold", "on vacation", "in beta"); what was
    # moved is not the speaker.
    ("Anna is in my team.", "Anna is in Lisbon this week."),
    ("My therapist is in Brooklyn.", "My therapist is on vacation."),
    ("The project is on GitHub.", "The project is on hold."),
    ("I live in Leeds.", "We moved the office to Bristol."),
    # A name with its verb is the subject the clause after it continues; a greeting's name
    # is the listener.
    ("I live in Pune with my wife.", "Priya is my boss and lives in Delhi."),
    ("I live in Leeds.", "Melanie took the kids camping last week and lives in Denver now."),
    ("I live in Leeds.", "Anna got a new job, so moved to Bristol."),
    # A plan is no new value: they live in Valencia until June.
    ("I live in Valencia.", "We're moving to Madrid in June because of the new job."),
    # A name after a label is still whose statement it is.
    ("Anna deploys to Fly.io.", "Update: Ben deploys to Render instead of Fly.io."),
    # A thing replaced names its old value only with what replaced it ("with", "for", "by").
    ("My laptop battery lasts two hours.", "I replaced the battery last week."),
    ("I live in Leeds.", "We went out for dinner from 7 until late."),
    # A thing sold names its old value as a name; "my bike" shares nothing else.
    ("I bike to work every day.", "I sold my bike to Tom."),
]


@pytest.mark.parametrize(("old", "new"), SAME_SLOT)
def test_the_same_slot_with_another_value_replaces(old: str, new: str) -> None:
    s = slots.default_slots()
    assert slots.replaces(s.read(new), s.read(old)) is not None


@pytest.mark.parametrize(("old", "new"), NOT_REPLACED)
def test_other_facts_do_not_replace(old: str, new: str) -> None:
    s = slots.default_slots()
    assert slots.replaces(s.read(new), s.read(old)) is None


def test_relations_extend_in_settings() -> None:
    extended = slots.slots_for({"plays_for": ["plays? (?:now )?for"]}, {})
    assert slots.replaces(
        extended.read("I play for the Tigers now."), extended.read("I play for the Lions.")
    )
    plain = slots.default_slots()
    assert (
        slots.replaces(
            plain.read("I play for the Tigers now."), plain.read("I play for the Lions.")
        )
        is None
    )
