"""The synthetic transcripts' vocabulary (imported as `_vocab` from bench/): word pools,
fact and request templates filled from them, paraphrases that fold into one claim, and bulk
text (code, test logs, thinking prose) sliced at random for tool results. Every draw takes a
`random.Random`, so a seed always gives the same words."""

from __future__ import annotations

import math
import random
import re

# --------------------------------------------------------------------------- vocabulary


def _words(text: str) -> list[str]:
    return text.split()


_AGENT_NAMES = ["main", "coder", "research", "ops", "writer", "family", "lab", "support"]
_FOODS = ["peanuts", "shellfish", "gluten", "cashews", "strawberries", "sesame", "lactose"]
_NAMES = ["Anna", "Ben", "Chloe", "Dmitri", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jonas"]
_NAMES += ["Keiko", "Liam", "Maya", "Noor", "Oscar", "Priya", "Quentin", "Rosa", "Sven", "Tariq"]
_RELATIONS = ["sister", "brother", "manager", "dog", "cat", "partner", "daughter", "son"]
_CITIES = ["Lisbon", "Osaka", "Toronto", "Berlin", "Nairobi", "Austin", "Lyon", "Seoul"]
_EDITORS = ["Neovim", "VS Code", "Helix", "Emacs", "Zed", "PyCharm"]
_LANGS = ["Python", "TypeScript", "Rust", "Go", "Kotlin"]
_STYLES = ["tabs", "spaces", "small commits", "squash merges", "type hints", "dataclasses"]
_STYLES += ["early returns", "pure functions", "snake case", "long descriptive names"]
_WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
_MONTHS = ["January", "March", "May", "July", "September", "November"]
_PROJECTS = ["atlas", "beacon", "cobalt", "delta", "ember", "fjord", "garnet", "harbor"]
_TOOLS = ["pytest", "ruff", "mypy", "eslint", "vitest", "cargo clippy", "the formatter"]
_HOSTS = ["db-staging.internal", "build-03.lan", "api.staging.example.net", "pg-replica-2"]
_MODULES = _words(
    "config scheduler parser cache auth billing cursor store migrations reader writer "
    "session index search export importer router handler queue worker metrics logging "
    "retry backoff pricing budget client server models views templates cli output "
    "progress settings registry matcher scanner tokenizer corpus claims scoring"
)
_CONCEPTS = [
    "retry handling",
    "the cursor logic",
    "timezone parsing",
    "error reporting",
    "the cache invalidation",
    "connection pooling",
    "the upgrade path",
    "partial writes",
    "unicode handling",
    "the lock file",
    "rate limiting",
    "the batch size",
    "empty inputs",
    "the date rollover",
    "concurrent runs",
    "the default settings",
    "line endings",
    "large files",
    "the exit codes",
    "the JSON output",
    "schema changes",
    "deleted rows",
    "the progress bar",
    "symlinked folders",
    "stale cursors",
    "the config loader",
    "duplicate events",
    "the test fixtures",
    "the fallback path",
    "slow queries",
]
_PATTERNS = ["dependency injection", "a small state machine", "a context manager"]
_PATTERNS += ["a plain dataclass", "a generator", "a single query", "a lookup table"]
_ADJ = _words(
    "stale new old broken flaky slow fast empty nested cached pending missing extra shared "
    "private public partial final early late hidden silent noisy fragile strict lenient "
    "async sync lazy eager raw clean dirty short long inner outer upper lower first last"
)
_NOUN = _words(
    "cursor offset header footer buffer handle token session record batch column index "
    "query result payload message event timestamp counter limit budget window snapshot "
    "manifest checksum digest lock socket stream channel thread worker task job queue "
    "schema migration table row field key value entry cache page chunk block frame span "
    "filter mapping pointer marker banner prompt reply summary report metric gauge sample"
)
_VERB = _words(
    "validates flushes rewrites skips counts caches reloads trims sorts merges splits "
    "retries logs drops checks parses encodes decodes renames moves keeps clears resets "
    "locks unlocks batches streams"
)

_FACT_TEMPLATES = [
    "I'm allergic to {food}.",
    "My {relation} is called {name}.",
    "I live in {city} these days.",
    "My favourite editor is {editor}.",
    "I prefer {style} over {style2} in {lang} code.",
    "We deploy {project} every {weekday} afternoon.",
    "Please always run {tool} before you commit anything.",
    "Never push directly to the main branch of {project}.",
    "The staging server for {project} is {host}.",
    "My birthday is in {month}.",
    "Call me {name} from now on.",
    "Our team standup for {project} happens every {weekday} morning.",
    "Remember that {project} uses {lang} for the backend services.",
    "My {relation} {name} visits us every {weekday}.",
]
_CHITCHAT = [
    "Thanks, that looks good to me.",
    "Great work on the refactor yesterday.",
    "Let's keep going with the plan.",
    "I'm back from lunch, let's continue.",
    "Sorry for the delay, I was stuck in a meeting.",
    "That was quick, nice job!",
    "Good morning, hope the build is green today.",
    "Perfect, that is exactly what I wanted.",
    "Okay, this is getting long, let's wrap up soon.",
    "Coffee first, then we fix the flaky tests.",
    "了解、ありがとう！ Let's continue after lunch.",
    "👍 looks great, ship it when the checks pass.",
    "Hmm, that's not quite what I meant earlier.",
    "No rush on this one, take your time.",
    "The weather here is terrible today, perfect for coding.",
]
_REQUESTS = [
    "Can you fix the failing test in the {module} module?",
    "Please refactor the {module} module to use {pattern}.",
    "Could you look at {concept} in {module} again?",
    "Please add tests for {concept} in the {module} module.",
    "Why does {module} break on {concept}?",
    "Let's rename the {module} helpers and clean up {concept}.",
    "Please make {module} handle {concept} without crashing.",
    "Run the whole test suite and tell me what fails.",
]
_NARRATION = [
    "Let me read the {module} module to understand how {concept} works.",
    "I'll run {tool} to check the {concept} changes.",
    "Now I'll update the {module} tests to cover {concept}.",
    "The failure comes from {concept} in the {module} module.",
    "Let me search for every place that touches {concept}.",
    "I'll make a small edit to {module} and rerun the tests.",
    "Good, {tool} is clean now; next is {concept}.",
]
_REPLIES = [
    "Done. I updated {module} so that {concept} is handled in one place, and the tests pass.",
    "I fixed {concept} in the {module} module and added a regression test.",
    "The {module} change is in; {tool} and the test suite are both green.",
    "I could not reproduce the problem with {concept}, so I added logging to {module}.",
    "Everything passes now, including the slow tests for {module}.",
]
_UNIQUE = "The {adj} {noun} in {module} now {verb} the {noun2} before {concept}."

_SENDERS = [
    ("openclaw-tui (gateway-client)", "gateway-client", "openclaw-tui"),
    ("openclaw-control-ui", "openclaw-control-ui", None),
    ("telegram (bot)", "telegram:4711", "alice_k"),
]
_MODEL = ("anthropic-messages", "anthropic", "claude-sonnet-4-5")


def _fill(template: str, rng: random.Random) -> str:
    slots: dict[str, str] = {}
    for name in re.findall(r"{(\w+)}", template):
        if name in slots:
            continue
        pool = {
            "food": _FOODS,
            "name": _NAMES,
            "relation": _RELATIONS,
            "city": _CITIES,
            "editor": _EDITORS,
            "lang": _LANGS,
            "style": _STYLES,
            "style2": _STYLES,
            "weekday": _WEEKDAYS,
            "month": _MONTHS,
            "project": _PROJECTS,
            "tool": _TOOLS,
            "host": _HOSTS,
            "module": _MODULES,
            "concept": _CONCEPTS,
            "pattern": _PATTERNS,
            "adj": _ADJ,
            "noun": _NOUN,
            "noun2": _NOUN,
            "verb": _VERB,
        }[name]
        slots[name] = rng.choice(pool)
    return template.format(**slots)


def _paraphrase(fact: str, rng: random.Random) -> str:
    """Small rewordings that still fold into one claim (same content words or nearly)."""
    r = rng.random()
    if r < 0.25:
        return fact.replace("I'm", "I am").replace("My ", "my ", 1).rstrip(".") + "!"
    if r < 0.4:
        return "Just so you know, " + fact[0].lower() + fact[1:]
    if r < 0.5:
        return fact.rstrip(".") + ", please remember that."
    return fact


# --------------------------------------------------------------------------- bulk text


def _code_corpus(rng: random.Random, target: int) -> str:
    """Code-like text (Python and TypeScript flavoured) with quotes and backslashes."""
    out: list[str] = []
    size = 0
    while size < target:
        mod, noun, noun2, verb = (
            rng.choice(_MODULES),
            rng.choice(_NOUN),
            rng.choice(_NOUN),
            rng.choice(_VERB).rstrip("s"),
        )
        kind = rng.random()
        if kind < 0.5:
            block = (
                f"def {verb}_{noun}(self, {noun2}: {rng.choice(['str', 'int', 'bytes'])}) -> "
                f"{rng.choice(['None', 'bool', 'list[str]'])}:\n"
                f'    """{verb.capitalize()} the {noun} of a {noun2} ({mod})."""\n'
                f"    if {noun2} is None:\n"
                f'        raise ValueError("{noun2} missing in {mod}: %r" % ({noun2},))\n'
                f"    for i, item in enumerate(self._{noun}s):\n"
                f"        if item.{noun2} == {noun2}:\n"
                f"            return self._{verb}(item, path='C:\\\\data\\\\{mod}\\\\{noun}')\n"
                f'    log.debug("{verb} {noun}: %s", {noun2})\n'
                f"    return self.{noun}_cache.get({noun2}, {rng.randrange(1000)})\n\n"
            )
        elif kind < 0.85:
            block = (
                f"export function {verb}{noun.capitalize()}({noun2}: {noun.capitalize()}) {{\n"
                f"  const {noun} = await {mod}.{verb}({noun2}, "
                f"{{ retries: {rng.randrange(9)} }});\n"
                f"  if (!{noun}) throw new Error(`no {noun} for ${{{noun2}.id}}`);\n"
                f'  return {{ ...{noun}, label: "{mod}/{noun2}", tabs: "\\t\\t" }};\n'
                f"}}\n\n"
            )
        else:
            block = (
                f"# {rng.choice(_CONCEPTS).capitalize()}: the {noun} is {verb}ed before the "
                f"{noun2} so a crash never leaves a half-written {rng.choice(_NOUN)}.\n"
                f"import {mod}\nfrom .{rng.choice(_MODULES)} import {noun.capitalize()}\n\n"
            )
        out.append(block)
        size += len(block)
    return "".join(out)


def _log_corpus(rng: random.Random, target: int) -> str:
    """Test runner and build output, with the odd traceback."""
    out: list[str] = []
    size = 0
    while size < target:
        mod, noun, verb = rng.choice(_MODULES), rng.choice(_NOUN), rng.choice(_VERB)
        r = rng.random()
        if r < 0.7:
            status = "PASSED" if rng.random() < 0.93 else "FAILED"
            line = (
                f"tests/test_{mod}.py::test_{verb.rstrip('s')}_{noun} {status}"
                f"{' ' * rng.randrange(1, 12)}[{rng.randrange(101):3d}%]\n"
            )
        elif r < 0.85:
            line = (
                f'  File "/home/dev/src/{mod}/{noun}.py", line {rng.randrange(1, 900)}, '
                f"in {verb}\n    return self._{noun}[{rng.choice(_NOUN)!r}]\n"
                f"KeyError: '{rng.choice(_NOUN)}'\n"
            )
        else:
            line = (
                f"src/{mod}/{noun}.py:{rng.randrange(1, 400)}:{rng.randrange(1, 80)}: "
                f"E{rng.randrange(100, 999)} {rng.choice(_ADJ)} {noun} in {verb}\n"
            )
        out.append(line)
        size += len(line)
    return "".join(out)


def _prose_corpus(rng: random.Random, target: int) -> str:
    """Thinking-style prose: the model planning its next step."""
    out: list[str] = []
    size = 0
    while size < target:
        para = " ".join(
            _fill(
                rng.choice([*_NARRATION, _UNIQUE, "The user wants {concept} fixed in {module}."]),
                rng,
            )
            for _ in range(rng.randint(2, 6))
        )
        out.append(para + "\n\n")
        size += len(para) + 2
    return "".join(out)


class _Slicer:
    """Random slices of a large pre-built text, cut at line starts: cheap bulk content."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.n = len(text)

    def take(self, rng: random.Random, size: int) -> str:
        size = max(1, min(size, self.n // 2))
        start = rng.randrange(self.n - size)
        nl = self.text.find("\n", start, start + 400)
        if nl >= 0:
            start = nl + 1
        return self.text[start : start + size]


def _lognormal_size(rng: random.Random, median: float, sigma: float, cap: int) -> int:
    return min(cap, max(16, int(rng.lognormvariate(math.log(median), sigma))))
