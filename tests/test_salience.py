"""Salience: claims score by what they tell, in English and in languages without spaces."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from dreaming.config import ConfigError, DeepSettings, parse_settings
from dreaming.ingest.claims import content_tokens, extract, sentences, words
from dreaming.ingest.salience import Feature, Lexicon, Salience, assess, group_of, lexicon_for
from dreaming.ingest.scoring import Rarity, Signals, clarity, score, telling_words


def signals(
    owner: int,
    agent: int,
    *,
    sessions: int = 1,
    seen: datetime | None = None,
    said: Salience | None = None,
    rarity: float = 0.5,
    chars: int = 40,
) -> Signals:
    """A candidate's signals: said `owner` and `agent` times over `sessions` sessions."""
    said = said or Salience(frozenset(), 0.0)
    return Signals(
        sessions,
        sessions,
        owner,
        agent,
        0,
        0,
        seen,
        False,
        salience=said.value,
        features=said.features,
        rarity=rarity,
        chars=chars,
    )


def value(text: str) -> float:
    return assess(text).value


def zeroed(text: str) -> bool:
    return assess(text).zero


@pytest.mark.parametrize(
    "text",
    [
        "Wow, that's awesome!",
        "Your kind words really mean a lot.",
        "Thanks for the support, Melanie!",
        "Hey Mel! Good to see you!",
        "That's so sweet of you, I really appreciate it.",
        "ありがとう！",
        "⚠️ Agent failed before reply: No API key found for provider anthropic.",
        "Error: ENOENT: no such file or directory, open config.json",
        "Run the whole test suite and tell me what fails.",
        "Can you fix the failing import in the parser module",
        "Let me check the MCP servers status.",
        "Work on bead spotter-dov.",
        "ok, now we need to adjust the light theme accordingly.",
        "its API and what it returns.",
        "since I moved from my home country.",
        "You must have had some great ideas!",  # "you must" here guesses, it sets no rule
        # reactions to the listener, however many words they hold
        "Must have been traumatizing for you guys.",
        "It must have been so hard for you.",
        "Enjoy the good feels tomorrow, you earned it!",
        "I knew you'd be on board.",
        "You've come so far since we last talked, and tomorrow's gonna be a blast!",
        "Always rooting for you.",
        "You must love it.",  # a guess about the listener, not a rule for the agent
        "Happy to help whenever you need it!",
        "Let me know whenever you need assistance.",
        "Glad Max is bringing you lots of joy.",
        "I knew you\u2019d be on board.",  # a curly apostrophe reads as a straight one
        "I'd rather not talk about it.",
    ],
)
def test_small_talk_requests_banners_and_fragments_score_zero(text: str) -> None:
    assert zeroed(text), assess(text)
    assert value(text) == 0.0


@pytest.mark.parametrize(
    ("text", "feature"),
    [
        ("Always run the linter before committing.", Feature.INSTRUCTION),
        ("Never push directly to the main branch.", Feature.INSTRUCTION),
        ("Don't touch the production database without asking me first.", Feature.INSTRUCTION),
        ("From now on, reply in British English.", Feature.INSTRUCTION),
        ("Call me Bob from now on.", Feature.INSTRUCTION),
        ("MEMORY.md以外の変更を禁ずる", Feature.INSTRUCTION),
        ("僕をボブにゃんとよぶこと", Feature.INSTRUCTION),
        ("I'm allergic to peanuts.", Feature.CONSTRAINT),
        ("My son can't eat gluten, he has celiac disease.", Feature.CONSTRAINT),
        ("I went to a support group yesterday and it was so powerful.", Feature.EVENT),
        ("We adopted a puppy named Max last month.", Feature.EVENT),
        ("The staging database is called bluebird.", Feature.FACT),
        ("My sister Anna lives in Lisbon.", Feature.DISCLOSURE),
        # what someone drives is theirs, its make no name called out
        ("I drive a Kia Niro EV now.", Feature.DISCLOSURE),
        ("I work as a nurse at the county hospital.", Feature.DISCLOSURE),
        ("My daughter Emma turns 7 on June 3.", Feature.NUMBERS),
        # The owner's world as a coding agent hears it: where things run, who owns what.
        ("My manager for the billing migration is Priya.", Feature.FACT),
        ("My dentist is Dr. Patel.", Feature.FACT),
        ("Our prod database runs in eu-west-1.", Feature.FACT),
        ("Our analytics cluster runs in the Frankfurt region.", Feature.FACT),
        ("I deploy the payments service from the release branch.", Feature.FACT),
        ("Reminder: My manager for the billing migration is Priya.", Feature.INSTRUCTION),
        ("FYI, our Kafka cluster runs in the Oregon region.", Feature.FACT),
        ("Contemporary is my top pick.", Feature.FACT),
        ("I prefer reviewing pull requests in the #infra channel.", Feature.INSTRUCTION),
        ("I'd rather get the summary in the morning.", Feature.INSTRUCTION),
        ("Always bring your badge to the office.", Feature.INSTRUCTION),
        ("You must always ask before deleting files.", Feature.INSTRUCTION),
        ("You must not push to main.", Feature.INSTRUCTION),
        ("You must have a ticket number in every commit message.", Feature.INSTRUCTION),
        # a rule said in the same breath as a reaction is still a rule
        ("Sounds like a plan, from now on always use pnpm.", Feature.INSTRUCTION),
        (
            "Good luck with the launch, and from now on always cc me on release notes.",
            Feature.INSTRUCTION,
        ),
        ("I'd prefer to get the summary by email.", Feature.INSTRUCTION),
        ("It must be done before Friday's release.", Feature.TIME),  # not a reaction
        ("Music is a big part of my life.", Feature.FACT),  # a generic subject, but theirs
        ("Lawrence is a nurse at the clinic.", Feature.FACT),
        # a convention for a kind of thing is a standing rule, however politely it is asked
        ("By the way, please use snake_case for function names.", Feature.INSTRUCTION),
        ("Please keep commit messages in the imperative mood.", Feature.INSTRUCTION),
        ("Prefix branch names with the ticket id.", Feature.INSTRUCTION),
        ("Format dates as ISO 8601 in all log lines.", Feature.INSTRUCTION),
        ("Use pytest fixtures instead of setUp methods.", Feature.INSTRUCTION),
        ("Prefer composition over inheritance.", Feature.INSTRUCTION),
        ("Never commit directly to main; open a PR against develop.", Feature.INSTRUCTION),
        # how and where a project ships, a named thing's identifier, a team
        ("We deploy with GitHub Actions to Fly.io.", Feature.FACT),
        ("We now deploy to Render instead of Fly.io.", Feature.FACT),
        ("The staging app is checkout-staging.", Feature.FACT),
        ("I'm now on the payments team.", Feature.FACT),
        ("Priya joined the platform team.", Feature.FACT),
        # who fills a role for the owner, said after a word that joins it to the chat
        ("Also my gym is now BasicFit, FitLife closed.", Feature.FACT),
        ("Quick update: my manager is now Sofía.", Feature.FACT),
        # when a place is open, where things come from, what the agent must not suggest
        ("We open at 6am and close at 3pm, and Mondays we're closed.", Feature.FACT),
        ("The gym is open until 10pm.", Feature.FACT),
        ("Eggs now come from Meadow Farm instead of Hilltop.", Feature.FACT),
        ("Our flour is supplied by Shipton Mill.", Feature.FACT),
        ("We use Python 3.11.", Feature.FACT),
        ("Please don't suggest recipes with nuts.", Feature.INSTRUCTION),
        ("Don't schedule meetings before 10am.", Feature.INSTRUCTION),
    ],
)
def test_informative_claims_fire_their_feature(text: str, feature: Feature) -> None:
    found = assess(text)
    assert feature in found.features, found
    assert not found.zero
    assert found.value > 0


@pytest.mark.parametrize(
    "text",
    [
        "Books have such an awesome power!",  # a capitalised common noun: nobody's fact
        "Kids are amazingly resilient in tough situations.",
        "Pets are the best for lifting our spirits.",
        "Success is almost here.",
        "Cooking is a great way to chill and be creative.",
        "Yoga is indeed amazing for your body and mind.",
        "I walked to the bank branch downtown.",  # a branch of no repository
        "They are my favourite people.",
        "I prefer nothing too spicy.",
    ],
)
def test_generalisations_are_no_named_fact(text: str) -> None:
    found = assess(text)
    assert Feature.FACT not in found.features, found
    assert Feature.INSTRUCTION not in found.features, found


@pytest.mark.parametrize(
    "text",
    [
        "My manager for the billing migration is Priya.",
        "Our prod database runs in eu-west-1.",
        "I deploy the payments service from the release branch.",
        "I prefer reviewing pull requests in the #infra channel.",
        # who the user is, said once as people introduce themselves
        "I'm Ana, a backend engineer at Acme.",
        "I'm a nurse at St Mary's hospital.",
        "I'm Tom, the lead for the payments team.",
        "I'm Marta, by the way.",
        # where a service is found, and what the project is built with
        "The API base URL is https://api.internal.acme.dev/v2.",
        "We use Python 3.11 and poetry for dependencies.",
        # what the project is made with
        "We build the billing service in Go.",
        "The API is written in Rust.",
        # a coding convention, asked politely, and where the project ships
        "Please use snake_case for function names in the Python helpers.",
        "Please keep commit messages in the imperative mood, under 72 characters.",
        "We deploy with GitHub Actions to Fly.io, and the staging app is checkout-staging.",
        "And I'm now on the payments team, not checkout.",
        "I drive a Kia Niro EV now.",
    ],
)
def test_a_work_fact_said_once_by_the_owner_clears_deeps_gate(text: str) -> None:
    # deep's default min_score is 1.15; a middling rarity, said once, no REM boost
    found = assess(text)
    said_once = signals(1, 0, said=found, rarity=0.5, chars=len(text))
    assert score(said_once, None, 14.0) > 1.15, found


@pytest.mark.parametrize(
    "text",
    [
        "I'm Sorry, a meeting came up.",
        "I'm a little late for the meeting.",
        "I'm tired, a bit.",
        "I'm Glad, thanks for the help.",
    ],
)
def test_a_state_of_mind_is_no_self_introduction(text: str) -> None:
    assert Feature.FACT not in assess(text).features, text


@pytest.mark.parametrize(
    "text",
    [
        # a task on one thing, not a convention for a kind of thing
        "Please use the staging database for this test.",
        "Please keep the tests in the same file.",
        "Format the files with prettier.",
        "Write tests for the parser.",
        "Use this instead of the old helper.",
        "Please sort the imports.",
        "Please don't worry about it.",
        "Don't forget the milk.",
    ],
)
def test_a_task_on_one_thing_is_no_standing_rule(text: str) -> None:
    assert Feature.INSTRUCTION not in assess(text).features, text


@pytest.mark.parametrize(
    "text",
    [
        "The app is up-to-date.",
        "The service is in-house.",
        "The database is slow.",
        "Our repo is a mess.",
        "I'm in the team photo.",
    ],
)
def test_a_state_is_no_name_and_a_photo_is_no_team(text: str) -> None:
    assert Feature.FACT not in assess(text).features, text


@pytest.mark.parametrize(
    "text", ["The package is from Amazon.", "This is from John.", "It is by Tolkien."]
)
def test_what_something_is_from_is_no_supplier(text: str) -> None:
    assert Feature.FACT not in assess(text).features, text


def test_where_a_service_is_needs_a_value_that_looks_like_one() -> None:
    assert Feature.FACT in assess("The DB host is db-3.internal.").features
    assert Feature.FACT not in assess("The host is nice.").features


def test_a_heading_word_is_no_request_but_the_verb_still_is() -> None:
    assert Feature.REQUEST not in assess("Update: I moved to Bristol last month.").features
    assert Feature.REQUEST in assess("Update the README please.").features


def test_instructions_outrank_chatter_and_narration_needs_the_owner() -> None:
    instruction = value("Always run the linter before committing.")
    chatter = value("It was a really nice day at the beach with everyone.")
    assert instruction > chatter
    narration = assess("I'll start by reading the config file.")
    assert Feature.NARRATION in narration.features
    agent_only = signals(0, 1, said=narration, chars=38)
    said_by_owner = signals(1, 0, said=narration, chars=38)
    assert score(agent_only, None, 14.0) == 0.0
    assert score(said_by_owner, None, 14.0) > 0.0


def test_a_single_strong_statement_outscores_recurring_small_talk() -> None:
    clock = datetime(2026, 3, 9, tzinfo=UTC)
    fact = assess("I'm allergic to peanuts.")
    thanks = assess("Thanks so much, that really means a lot to me!")
    once = signals(1, 0, seen=clock, said=fact, rarity=0.8, chars=24)
    often = signals(30, 0, sessions=9, seen=clock, said=thanks, rarity=0.1, chars=46)
    assert score(often, clock, 14.0) == 0.0
    assert score(once, clock, 14.0) > 1.0  # clears deep's default gate on its own


def test_repetition_only_corroborates_informative_claims() -> None:
    fact = assess("We deploy on Fridays only after the QA sign-off.")
    once = score(signals(1, 0, said=fact, chars=48), None, 14.0)
    thrice = score(signals(3, 0, sessions=3, said=fact, chars=48), None, 14.0)
    assert thrice > once > 0
    thanks = assess("Thanks so much, that really means a lot!")
    assert score(signals(9, 0, sessions=9, said=thanks), None, 14.0) == 0.0


def test_shorter_claims_that_tell_as_much_rank_higher() -> None:
    said = Salience(frozenset({Feature.EVENT}), 0.5)
    short, long = signals(1, 0, said=said, chars=30), signals(1, 0, said=said, chars=300)
    assert score(short, None, 14.0) > score(long, None, 14.0)


def test_rarity_is_relative_to_the_agents_corpus() -> None:
    docs = [["thank", "support"]] * 20 + [["allergic", "peanut"]]
    rarity = Rarity(docs)
    assert rarity.of(["allergic", "peanut"]) > rarity.of(["thank", "support"])
    assert 0.0 <= rarity.of(["unseen"]) <= 1.0
    assert Rarity([]).of(["x"]) == 0.0


def test_japanese_and_chinese_split_into_words_and_claims() -> None:
    assert len(words("MEMORY.md以外の変更を禁ずる")) >= 4
    assert len(words("我喜欢吃北京烤鸭")) >= 4
    out = [
        c.text
        for c in extract(
            "USER.mdも僕の承認のみ変更。僕をボブにゃんとよぶこと", min_words=4, max_words=60
        )
    ]
    assert out == ["USER.mdも僕の承認のみ変更。", "僕をボブにゃんとよぶこと"]


def test_sentences_are_whole_not_clauses_or_list_fragments() -> None:
    assert sentences("I moved here in May, since I moved from my home country.") == [
        "I moved here in May, since I moved from my home country."
    ]
    items = sentences("Steps: 1. Check its API and what it returns 2. Write the tests")
    assert "Check its API and what it returns" in items
    assert not any(s.endswith(" 2.") for s in items)
    assert sentences("See Dr. Smith at noon. Then go home.") == [
        "See Dr. Smith at noon.",
        "Then go home.",
    ]


def test_groups_for_memory_headings() -> None:
    assert group_of("2026-03-08 — the user: Always run the linter before committing.") == (
        "instructions"
    )
    assert group_of("The user loves hiking and prefers mornings.") == "preferences"
    assert group_of("The user works on the billing project.") == "work"
    assert group_of("The user's sister Anna lives in Lisbon.") == "people"
    # a relative's job is about the relative; a boss's request is work's
    assert group_of("My sister Anna lives in Lisbon and works as an architect.") == "people"
    assert group_of("The user's wife works as a nurse at the county hospital.") == "people"
    assert group_of("My boss wants the release notes by Friday.") == "work"


def test_cue_lists_extend_from_settings() -> None:
    plain = assess("We hold the blorfing ritual each dusk.")
    assert Feature.INSTRUCTION not in plain.features
    settings = parse_settings({"salience": {"instruction": ["blorf\\w*"]}}, "dreaming.toml")
    lexicon = lexicon_for(settings.salience.extra())
    assert lexicon is lexicon_for(settings.salience.extra())  # built once
    assert Feature.INSTRUCTION in assess("We hold the blorfing ritual each dusk.", lexicon).features
    assert isinstance(lexicon, Lexicon)


def test_a_bad_cue_pattern_is_a_clear_settings_error() -> None:
    with pytest.raises(ConfigError, match="instruction"):
        parse_settings({"salience": {"instruction": ["(unclosed"]}}, "dreaming.toml")
    with pytest.raises(ConfigError, match="unknown key"):
        parse_settings({"salience": {"instructions": ["x"]}}, "dreaming.toml")


def test_task_talk_in_a_coding_session_earns_little_but_rules_in_it_count() -> None:
    chatter = assess("i removed them, tui-renderer.ts renders fine now with the --debug flag")
    assert Feature.TECHNICAL in chatter.features
    assert chatter.value <= 0.1
    rule = assess("Never edit package-lock.json by hand.")
    assert Feature.INSTRUCTION in rule.features and rule.value >= 0.8


def clears(text: str) -> bool:
    """Whether the owner saying `text` once clears deep's default gate."""
    found = assess(text)
    words = telling_words(content_tokens(text))
    return clarity(found.value, found.features, words, 1, 0) >= DeepSettings().min_score


@pytest.mark.parametrize(
    "text",
    [
        # an appraisal or a generalisation with no holder
        "The Colosseum is so cool!",
        "Basil is indeed delicious!",
        "Golden Retrievers are truly awesome.",
        "Practice is key to success.",
        "Painting has the power to bring people together.",
        "Nature has a way of humbling us and reminding us that we're small.",
        "Injuries can be tough.",  # a health word, but nobody's need
        "Saturday's launch party will be so much fun.",
        # looking forward, said as a feeling
        "Can't wait for the big premiere tomorrow!",
        "Can't wait to go back next summer.",
        # the listener's news, appraised; hearsay; a reminder; an offer
        "I love how you turn your stories into songs.",
        "I bet you never expected a fourth kitten this year!",
        "I heard they make a great lasagna there!",
        "This photo reminds me of a road trip we took last year.",
        "I love to help, so just send me a question whenever you need!",
        # what a light verb was done to, said as a bare pronoun; a bare "they" as the subject
        "I took it at the lake last week.",
        "I've had him for three years now.",
        "When I got it, I felt all sorts of things.",
        "Thankfully, they loved the canyon tour a lot!",
        # a caption for a thing pointed at
        "Last night I made this tasty stew, so good!",
        "These mugs I bought yesterday remind me of home.",
        "I came across this spot while hiking.",  # "across" tells nothing
    ],
)
def test_appraisals_reactions_and_bare_pronouns_are_small_talk(text: str) -> None:
    found = assess(text)
    assert found.zero, found
    assert not clears(text)


@pytest.mark.parametrize(
    "text",
    [
        "We had a great time last weekend.",  # says when, not what
        "I learned that the hard way last year.",
        "I got a great pic last night.",
        "Something funny happened yesterday.",
        "Hey Lena, it's been ages since we talked.",
        "I climbed this last spring!",
    ],
)
def test_a_time_word_alone_does_not_make_a_thin_line_clear(text: str) -> None:
    assert not clears(text), assess(text)


@pytest.mark.parametrize(
    "text",
    [
        # the same shapes, the speaker's own
        "Gardening is my stress relief too.",
        "Knitting is a big part of my life, not just a hobby.",
        "The Hobbit is my favorite book.",
        "Can't wait for our trip to the coast with the kids next month.",
        "A gift from my aunt in my home country, Norway.",  # a place, not a listener
        "Hey Lena, I had to close my bank account.",
        # what happened, in enough telling words, or with a name, a number or a milestone
        "I won the regional chess tournament.",
        "Yesterday I took the kids to the aquarium.",
        "I got a puppy two weeks ago!",
        "I graduated last week!",
        "We're not married yet but we've been together for three years.",
        "I'm volunteering as a mentor at a local school.",
        "I'm hooked on this great game called Stardew Valley.",
        "My new number is 555 0134, let me know if it doesn't work.",
        "I made this quilt to show my path as a mother of three.",  # it says what it is
        "Took a short trip last week to Porto to clear my mind.",  # the "I" dropped, as in chat
        "Moreover, Max is already old, he is 8 years old.",
    ],
)
def test_specific_lines_of_the_speaker_clear_the_gate(text: str) -> None:
    found = assess(text)
    assert not found.zero, found
    assert clears(text), found


def test_the_name_a_line_is_said_to_is_no_name_in_it() -> None:
    for text in ("Hey Lena, it's been ages since we talked.", "I won't give up, Lena!"):
        assert Feature.NAMES not in assess(text).features, text
    for text in ("A gift from my aunt in my home country, Norway.", "I met Lena at the gym."):
        assert Feature.NAMES in assess(text).features, text
    assert Feature.NUMBERS in assess("We adopted two kittens in May.").features


def test_call_me_sets_a_rule_only_as_a_name() -> None:
    assert Feature.INSTRUCTION in assess("Call me Bob from now on.").features
    said = assess("If you are ever in town, call me at the store!")
    assert Feature.INSTRUCTION not in said.features, said


NARRATION_CASES = [
    "Let me check the config first.",
    "Now I need to look at the failing test.",
    "I've updated the parser to skip blank lines.",
    "Here's the summary of what changed.",
    "Sure, I can do that.",
    "and let me check it later",  # a fragment: no narration, whatever its cue
    "since let me know is what she says",  # a fragment again
    "Let me know if the deploy at line 42 fails.",  # a cue anywhere ("let me know")
    "HTTP 500 Internal Server Error. Let me retry.",  # a banner first
    "My daughter is allergic to peanuts.",
    "We deploy on Fridays only after the QA sign-off.",
    "了解しました、確認します。",
    "",
    "   Let me see   ",
]


@pytest.mark.parametrize("text", NARRATION_CASES)
def test_narrates_is_what_the_whole_assessment_says(text: str) -> None:
    """REM drops the agent's narration before assessing the rest: `narrates` must agree with
    `assess` on NARRATION for every text (banners and fragments return early there)."""
    from dreaming.ingest.salience import default_lexicon
    from dreaming.phases._rem_themes import narrates

    for lexicon in (default_lexicon(), lexicon_for({"narration": ["^as you can see"]})):
        found = assess(text, lexicon).features
        assert narrates(text, lexicon) == (Feature.NARRATION in found), text
    assert narrates("As you can see, it works.", lexicon_for({"narration": ["^as you can see"]}))


# The technical patterns as first written (a word, then what makes it technical), and the
# characters that exercise their edges: word characters on either side, spaces, line starts.
_PLAIN_TECHNICAL = {
    "file name": r"(?<!\w)\w+\.(?:ts|tsx|js|jsx|py|rs|go|java|rb|ex|exs|md|json|toml|ya?ml|txt"
    r"|sh|css|html|sql|lock|cfg|ini)\b",
    "snake_case": r"(?<!\w)\w+_\w+",
    "flag": r"(?:^|\s)--?[a-z][\w-]*",
    "src path": r"\bsrc/|/src\b",
}
_EDGES = [*"a_.-/ \n\t\x1c\u2028AZ09é'", "src", "src/", "/src", "ts", "yml", "json", "--"]


def _technical_pattern(name: str) -> str:
    import tomllib
    from importlib import resources

    lexicon = resources.files("dreaming.ingest").joinpath("lexicon.toml").read_text("utf-8")
    listed = tomllib.loads(lexicon)["technical"]
    firsts = {"file name": r"\.", "snake_case": "_", "flag": "-", "src path": "src/"}
    (found,) = [p for p in listed if p.startswith(firsts[name])]
    return found


@pytest.mark.parametrize("name", sorted(_PLAIN_TECHNICAL))
def test_a_technical_pattern_written_literal_first_finds_what_its_plain_form_finds(
    name: str,
) -> None:
    import random
    import re

    plain, fast = re.compile(_PLAIN_TECHNICAL[name]), re.compile(_technical_pattern(name))
    rnd = random.Random(name)
    for _ in range(20000):
        text = "".join(rnd.choice(_EDGES) for _ in range(rnd.randint(0, 12)))
        assert bool(plain.search(text)) == bool(fast.search(text)), (name, text)
    examples = {
        "file name": ["see main.ts now", "a.yml"],
        "snake_case": ["my_var", "set MAX_GRAM"],
        "flag": ["run --fix", "-v"],
        "src path": ["in src/app", "lib/src"],
    }
    for text in examples[name]:
        assert fast.search(text) and plain.search(text), (name, text)


def test_numbers_in_words_are_the_regex_s_on_any_text() -> None:
    import random

    import dreaming.ingest._named as _named
    from dreaming.ingest.cues import Text

    pieces = ["two", "Twenty", "DOZEN", "one", "ten", "eighteen", "x", "3", " ", "-", "_", "é"]
    rnd = random.Random(7)
    for _ in range(20000):
        body = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 6)))
        expected = bool(_named._DIGIT.search(body) or _named._NUMBER_WORDS.search(body))
        text = Text.of(body, words(body))
        assert _named.says_a_number(body, text) == expected, body
