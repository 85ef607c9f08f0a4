"""People state rules and facts the way they talk (DESIGN, "What is worth remembering"):
with code, paths and URLs in them, in a second clause, as a change; and a line that cannot
stand on its own is no memory."""

from __future__ import annotations

import pytest

from dreaming.ingest.claims import content_tokens, extract, sentences
from dreaming.ingest.salience import Feature, Salience, assess, group_of
from dreaming.ingest.scoring import Signals, score
from dreaming.memory import memory_file as mf
from dreaming.memory.sanitize import entry_text_problems, sanitize_entry_text

GATE = 1.15  # deep's default min_score


def claims(text: str) -> list[str]:
    return [c.text for c in extract(text, min_words=4, max_words=60)]


def clears_the_gate(text: str) -> tuple[Salience, float]:
    found = assess(text)
    signals = Signals(
        1,
        1,
        1,
        0,
        0,
        0,
        None,
        False,
        salience=found.value,
        features=found.features,
        rarity=0.5,
        chars=len(text),
    )
    return found, score(signals, None, 14.0)


# -- A. code in a sentence is part of the sentence ------------------------------------------

CODE_BEARING = [
    "Never push directly to `main`, open a PR against `develop`.",
    "From now on the feature flags go in `config/flags.yaml`.",
    "Our secrets live in ~/.config/acme/credentials.toml and must never be printed.",
    "The docs are published at https://docs.internal.example.org now, so always link there.",
]


@pytest.mark.parametrize("text", CODE_BEARING)
def test_inline_code_paths_and_urls_stay_in_their_claim(text: str) -> None:
    assert claims(text) == [text]


@pytest.mark.parametrize("text", CODE_BEARING)
def test_code_bearing_rules_and_facts_clear_deeps_gate(text: str) -> None:
    found, value = clears_the_gate(text)
    assert found.features & {Feature.INSTRUCTION, Feature.FACT}, found
    assert value > GATE, found


def test_paths_urls_and_identifiers_make_sane_tokens() -> None:
    flags = extract(CODE_BEARING[1], min_words=4, max_words=60)[0].tokens
    assert {"config", "flag", "yaml", "feature"} <= flags
    docs = extract(CODE_BEARING[3], min_words=4, max_words=60)[0].tokens
    assert {"doc", "internal", "example", "published", "link"} <= docs
    assert not docs & {"http", "https", "www", "com", "org"}  # every URL has these
    # the same rule with and without its code marks is one claim
    assert content_tokens("Never push directly to main, open a PR against develop.") == (
        extract(CODE_BEARING[0], min_words=4, max_words=60)[0].tokens
    )


@pytest.mark.parametrize(
    "text",
    [
        # a pasted JSON line, a stack trace, a terminal prompt, a shell command line, a path list
        'then we need this: {"type":"message","role":"assistant","id":"toolu_01"} to work',
        "Error thrown at resolveVarRefs (/Users/me/src/theme/theme.ts:213:9) in the theme code",
        "~/work/pi-mono (refactor) ➜ pi-mono git:(refactor) npx tsx packages/cli.ts now",
        "npm install --save-dev typescript eslint prettier vitest",
        "lib/spotter_web/live/session_live.ex lib/spotter/services/transcript_renderer.ex ok",
        "The pattern is `new Markdown(text, paddingX, paddingY)` in `src/markdown.ts`.",
        "(esc to interrupt) ──────────────────── dark (current) → light nord ──────────",
    ],
)
def test_a_pasted_snippet_is_no_claim(text: str) -> None:
    assert claims(text) == []


def test_sentences_do_not_split_inside_code_or_before_a_directive() -> None:
    assert sentences("Run `make test; make lint` before pushing. Then stop.") == [
        "Run `make test; make lint` before pushing.",
        "Then stop.",
    ]
    assert sentences("Omar owns the on-call rota now; ask him about paging changes.") == [
        "Omar owns the on-call rota now; ask him about paging changes."
    ]
    assert sentences("We deploy on Fridays; the staging database is called bluebird.") == [
        "We deploy on Fridays",
        "the staging database is called bluebird.",
    ]
    # the second half of a rule, said as a directive of its own, stays with the first
    for rule in (
        "Never commit directly to main; open a PR against develop.",
        "Don't use `any` in the TypeScript code; prefer `unknown` and narrow it.",
        "Squash before merging; never push a merge commit.",
    ):
        assert sentences(rule) == [rule]
    assert sentences("I fixed the flaky test; the suite is green again.") == [
        "I fixed the flaky test",
        "the suite is green again.",
    ]


def test_a_backtick_between_letters_is_an_apostrophe() -> None:
    assert claims("Yep, last month I visited my mom`s house again.") == [
        "Yep, last month I visited my mom's house again."
    ]


def test_identifiers_do_not_zero_a_named_fact_but_task_talk_stays_worthless() -> None:
    snake = assess("The staging bucket is called acme_stage_assets")
    hyphen = assess("The staging bucket is called acme-stage-assets")
    assert Feature.TECHNICAL in snake.features and Feature.FACT in snake.features
    assert snake.value == hyphen.value > 0
    assert clears_the_gate("The staging bucket is called acme_stage_assets")[1] > GATE
    chatter = assess("i removed them, tui-renderer.ts is fine now")
    assert Feature.TECHNICAL in chatter.features
    assert chatter.value == 0.0
    # "is called" by code is no name
    assert Feature.FACT not in assess("The parser is called twice in load_config.py").features


@pytest.mark.parametrize("text", CODE_BEARING)
def test_code_bearing_entries_render_safely_in_memory_md(text: str) -> None:
    (claim,) = claims(text)
    entry = sanitize_entry_text(f"The user said: {claim}")
    assert entry == f"The user said: {text}"  # inline code, paths and URLs kept as they are
    assert entry_text_problems(entry) == []
    key = mf.entry_key(entry)
    content = "# Notes\n" + mf.render_line(key, entry) + "operator text with a ` tick\n"
    doc = mf.parse(content)
    assert doc.render() == content
    assert [(b.key, b.text) for b in doc.blocks] == [(key, entry)]
    assert entry.count("`") % 2 == 0


@pytest.mark.parametrize(
    ("text", "sanitized"),
    [
        # an unbalanced backtick opens no span that runs on into the key comment or the file
        ("Never push to `main, open a PR.", "Never push to main, open a PR."),
        ("Keep `a` and ``b`` but not `c", "Keep `a` and ``b`` but not c"),
        ("it`s my mom`s rule, never `rm` it", "it`s my mom`s rule, never `rm` it"),
        ("The flag is `--x``", "The flag is --x"),
        # markers, fences and links that run something are still removed around code
        (
            "Never push to `main` <!-- dreaming:entry m:0123456789abcdef --> ```sh rm``` "
            "see [docs](javascript:alert(1)) and https://docs.example.org",
            "Never push to `main` sh rm see docs (alert(1)) and https://docs.example.org",
        ),
    ],
)
def test_sanitizer_balances_inline_code_and_still_removes_breakouts(
    text: str, sanitized: str
) -> None:
    clean = sanitize_entry_text(text)
    assert clean == sanitized
    assert entry_text_problems(clean) == []
    assert sanitize_entry_text(clean) == clean


def test_a_code_span_cut_by_the_length_limit_is_closed_off() -> None:
    clean = sanitize_entry_text("Use `pnpm install --frozen-lockfile` always", max_chars=20)
    assert clean == "Use pnpm install"


# -- B. instructions and changes as people say them ----------------------------------------

LISTED = [
    "Dmitri handles all the AWS permissions these days, ask him whenever a deploy is blocked.",
    "The design team switched from Figma to Penpot, so share mockups as Penpot links.",
    "Hotel bookings go through Navan now, the old travel portal was shut down.",
    "Our accountant changed to Helga Brandt, so forward the tax letters to her.",
]

SAID_AS_PEOPLE_SAY_THEM = [
    # (text, a feature it must show)
    ("Priya took over the billing migration, so route invoice questions to her.", "instruction"),
    ("Marco is covering for Sam this week; page Marco if the pager goes off.", "instruction"),
    ("The team switched from Jira to Linear, so file bugs there.", "instruction"),
    (
        "Legal reviews all contracts these days, so send drafts to Ines before signing.",
        "instruction",
    ),
    ("The on-call rota is handled by Omar now; ask him about paging changes.", "instruction"),
    ("When you draft replies to clients, sign off with Best, Dana.", "instruction"),
    ("For status emails to my boss, don't use exclamation marks.", "instruction"),
    # A rule with its reason first, however short the reason ("I'm" is two words).
    ("I'm vegetarian, so please only suggest vegetarian recipes.", "instruction"),
    ("I'm allergic to peanuts, so never suggest anything with nuts.", "instruction"),
    ("Expense reports go through Concur now.", "fact"),
    ("Invoices are now approved by Greta.", "fact"),
    ("The Lisbon office relocated to Porto.", "fact"),
    ("Kofi joined the platform squad this week.", "event"),
    ("I'm head of data science at Kestrel Labs.", "disclosure"),
    ("I run the infrastructure team.", "fact"),
    ("My new number is 07700 900123.", "disclosure"),
    ("My email is now dana.k@fastmail.com.", "fact"),
]


@pytest.mark.parametrize("text", LISTED)
def test_the_issues_rules_and_changes_clear_deeps_gate(text: str) -> None:
    found, value = clears_the_gate(text)
    assert found.features & {Feature.INSTRUCTION, Feature.FACT}, found
    assert value > GATE, (found, value)


@pytest.mark.parametrize(
    "text",
    [LISTED[0], LISTED[1], LISTED[3]],
)
def test_a_directive_in_a_later_clause_is_an_instruction(text: str) -> None:
    assert Feature.INSTRUCTION in assess(text).features
    assert group_of(text) == "instructions"


@pytest.mark.parametrize(("text", "feature"), SAID_AS_PEOPLE_SAY_THEM)
def test_rules_changes_roles_and_contacts_count(text: str, feature: str) -> None:
    found, value = clears_the_gate(text)
    assert Feature(feature) in found.features, found
    assert value > GATE, (found, value)


def test_these_days_this_week_and_a_closing_now_are_time_words() -> None:
    for text in (
        "Dmitri handles the AWS permissions these days.",
        "Marco is covering for Sam this week.",
        "Hotel bookings go through Navan now.",
    ):
        assert Feature.TIME in assess(text).features, text


@pytest.mark.parametrize(
    "text",
    [
        "So now I'm just relaxing.",
        "I'm so happy now.",
        "Sounds like a plan, let's see.",
        "ok now run the tests",
        "That was amazing, so keep it up!",
        "Had a blast at the lake, so send me the pics when you can.",
        "Wow, now that's a great photo of Max!",
        "I'm so proud of you, and keep going with the painting!",
        "Now I can finally relax and read a book.",
        "So I told her that now is the time to go.",
        "ok, send it to Anna now",
        "It's normal to have hiccups, but use them to learn and grow.",
        "Thanks, Caroline, so share your story whenever you're ready.",
        "I don't use Facebook much anymore.",
        "I'm bored tonight, so suggest a good movie.",
        "I'm hungry, so please suggest something quick for lunch.",
    ],
)
def test_near_misses_are_no_instruction(text: str) -> None:
    found = assess(text)
    assert Feature.INSTRUCTION not in found.features, found
    assert clears_the_gate(text)[1] < GATE, found


# -- C. every line stands on its own -----------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "It's a symbol of all the obstacles I had to overcome.",
        "Is nowhere near the city.",
        "Much that I got tattoos of them on my arm.",
        "So much that I got tattoos of them on my arm.",
        "It is called Dorado.",
        "Because I wanted to see the ocean again.",
        "Because on Sunday I am going on a picnic date with my girlfriend.",
        "But it was totally worth it in the end.",
        "And here's a pic I got from my walk last week.",
        "Here is a photo of my garden",
        "Here's a picture I took on vacation last summer.",
        "I removed them all good.",
        "I reviwed what we have, it's good.",
        "done, looks good",
        "Fixed, looks good to me now.",
    ],
)
def test_a_line_that_cannot_stand_on_its_own_is_no_memory(text: str) -> None:
    found = assess(text)
    assert found.features & {Feature.FRAGMENT, Feature.SMALLTALK}, found
    assert found.value == 0.0


@pytest.mark.parametrize(
    "text",
    [
        "It's my birthday on March 3.",
        "It's been 3 years since I moved to Lisbon.",
        "It was just a setback, but I found comfort in my work and my friends.",
        "It's a 1968 Kustom vintage guitar and I got it as a gift from a close friend.",
        "I'm allergic to peanuts.",
        "Always run the linter.",
        "It is a rule here: never push to main.",
        "The boat Dorado is moored at pier nine.",
        "But I also started a pottery class last week.",
        "Because of my allergy I never eat peanuts, please remember that.",
        "I removed the old backups from the NAS last week.",
        "Here is my address: 12 Rose Lane, Leeds.",
    ],
)
def test_facts_rules_and_the_speakers_own_lines_still_stand(text: str) -> None:
    found = assess(text)
    assert not found.zero, found
    assert found.value > 0
