"""bench/locomo.py: the LoCoMo -> OpenClaw converter, its turn-id map, and a tiny end-to-end run
on hand-written LoCoMo-shaped data (the real data set is never needed here)."""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from dreaming import runner
from dreaming.app import App

BENCH = Path(__file__).resolve().parents[1] / "bench" / "locomo.py"


@pytest.fixture(scope="module")
def locomo() -> ModuleType:
    if str(BENCH.parent) not in sys.path:  # its helpers (_common) are imported from bench/
        sys.path.insert(0, str(BENCH.parent))
    spec = importlib.util.spec_from_file_location("bench_locomo", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_locomo"] = module
    spec.loader.exec_module(module)
    return module


def _turn(speaker: str, dia: str, text: str) -> dict[str, str]:
    return {"speaker": speaker, "dia_id": dia, "text": text}


def sample() -> dict[str, Any]:
    fact = "My favourite colour has always been teal, ever since school."
    return {
        "sample_id": "conv-99",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                _turn("Ann", "D1:1", "Hi Bob! How have you been lately?"),
                _turn("Bob", "D1:2", fact),
                _turn("Ann", "D1:3", "I adopted a small grey cat called Pixel last weekend."),
            ],
            "session_2_date_time": "10:37 am on 20 May, 2023",
            "session_2": [
                _turn("Bob", "D2:1", "Hey Ann, quick update from my side of things."),
                _turn("Bob", "D2:2", fact),
            ],
            "session_3_date_time": "9:00 am on 1 June, 2023",
            "session_3": [],
        },
        "qa": [
            {"question": "Colour?", "answer": "teal", "evidence": ["D2:2"], "category": 1},
            {"question": "Cat?", "answer": "Pixel", "evidence": ["D1:3; D2:02"], "category": 4},
            {"question": "Broken?", "answer": "x", "evidence": ["D7:1", "D"], "category": 2},
            {"question": "Adversarial?", "answer": "x", "evidence": ["D1:1"], "category": 5},
        ],
        "observation": {
            "session_1_observation": {
                "Bob": [["Bob's favourite colour has always been teal.", "D1:2"]],
                "Ann": [["Ann adopted a grey cat called Pixel.", "D:1:3"]],
            },
            "session_2_observation": {"Bob": [["Bob favours teal.", ["D2:2"]]]},
        },
    }


def test_load_normalizes_ids_and_skips_what_names_no_turn(locomo: ModuleType, tmp_path: Path):
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([sample()]))
    (conv,) = locomo.load(data, None)
    assert conv.agent == "conv-99"
    assert [s.number for s in conv.sessions] == [1, 2]  # the empty session_3 is not a session
    assert conv.sessions[1].start.isoformat() == "2023-05-20T10:37:00+00:00"
    assert [(q.category, q.evidence) for q in conv.questions] == [
        (1, ("D2:2",)),
        (4, ("D1:3", "D2:2")),
    ]
    assert conv.qa_unresolvable == 1  # category 2 with only unknown ids; category 5 ignored
    assert [o.dia_ids for o in conv.observations] == [("D1:2",), ("D1:3",), ("D2:2",)]


def test_transcripts_are_openclaw_v3_and_lines_map_back_to_turns(
    locomo: ModuleType, tmp_path: Path
):
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([sample()]))
    (conv,) = locomo.load(data, None)
    state = tmp_path / "state"
    locomo.write_conversation(state, conv, "both-user")
    folder = state / "agents" / "conv-99" / "sessions"
    lines = [json.loads(x) for x in (folder / "conv-99-s01.jsonl").read_text().splitlines()]
    assert lines[0] == {
        "type": "session",
        "version": 3,
        "id": "conv-99-s01",
        "timestamp": "2023-05-08T13:56:00.000Z",
    }
    assert [x["timestamp"] for x in lines[1:]] == [
        "2023-05-08T13:56:00.000Z",
        "2023-05-08T13:57:00.000Z",
        "2023-05-08T13:58:00.000Z",
    ]
    assert {x["message"]["role"] for x in lines[1:]} == {"user"}
    assert lines[2]["parentId"] == lines[1]["id"]
    index = json.loads((folder / "sessions.json").read_text())
    assert index["agent:conv-99:main:conv-99-s02"]["sessionId"] == "conv-99-s02"
    assert index["agent:conv-99:main:conv-99-s02"]["chatType"] == "direct"
    assert conv.dia_of[("conv-99-s01", 4)] == "D1:3"
    assert conv.line_of["D2:2"] == ("conv-99-s02", 3)

    # The map agrees with what the light phase records as each corpus line's reference.
    app = App.open(state, None, env={})
    try:
        runner.run(app, ["light"], ["conv-99"])
        with app.engine("conv-99").connect() as conn:
            rows = conn.exec_driver_sql("SELECT session_id, line, text FROM corpus_lines").all()
    finally:
        app.close()
    assert len(rows) == conv.turns
    for sid, line, text in rows:
        assert conv.turn(conv.dia_of[(sid, line)]).text == text

    other = tmp_path / "other"
    locomo.write_conversation(other, conv, "b-assistant")
    lines = [
        json.loads(x)
        for x in (other / "agents/conv-99/sessions/conv-99-s01.jsonl").read_text().splitlines()
    ]
    assert [x["message"]["role"] for x in lines[1:]] == ["user", "assistant", "user"]


def test_end_to_end_on_tiny_data(
    locomo: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([sample()]))
    assert locomo.main(["--data", str(data), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (run,) = doc["runs"]
    d = run["conversations"]["conv-99"]
    # The teal fact is said in two sessions with a cue: promoted, its turns are evidence.
    assert d["entries"] >= 1
    assert d["qa"] == 2 and d["qa_any"] >= 1
    assert d["recall"] >= 1
    assert d["llm_calls"] == 0
    assert d["purge"]["verify_ok"] and d["purge"]["leaks"] == 0
    assert d["purge"]["needles"] > 0
    assert d["purge"]["needles_found_before"] == d["purge"]["needles"]
    assert set(d["times"]) == {"light", "rem", "deep", "forget"}
    # The random baseline: same budget as MEMORY.md, five draws from seed 0, their mean.
    r = d["random"]
    assert r["budget"] == d["memory_chars"] and r["draws"] == 5 and r["candidates"] > 0
    assert [x["seed"] for x in r["per_draw"]] == [0, 1, 2, 3, 4]
    assert all(x["cost"] <= r["budget"] for x in r["per_draw"])
    assert r["qa_any"] == sum(x["qa_any"] for x in r["per_draw"]) / 5
    assert 0 <= r["qa_all"] <= r["qa_any"] <= d["qa"]
    assert 0 <= r["recall_evidence"] <= d["gold"]
    want = round(d["qa_any"] / r["qa_any"], 3) if r["qa_any"] else None
    assert d["qa_any_vs_random"] == want
    # Framing: MEMORY.md beyond the statements, per entry.
    assert d["framing"] == round(d["framing_chars"] / d["entries"], 2)
    assert 0 < d["framing_chars"] < d["memory_chars"]
    assert run["overall"]["framing"] == round(d["framing_chars"] / d["entries"], 2)
    # Small talk: a share of the entries, with up to five examples.
    assert 0 <= d["entries_small_talk"] <= d["entries"]
    assert len(d["small_talk_examples"]) == min(5, d["entries_small_talk"])
    o = run["overall"]
    assert (
        o["random"]["qa_any"] == r["qa_any"] and o["entries_small_talk"] == d["entries_small_talk"]
    )
    text = locomo.render(doc)
    for column in ("QA any (random)", "vs random", "recall(ev) (random)", "small talk"):
        assert column in text

    # Same seed, same draws; the seed and the number of draws are options.
    assert locomo.main(["--data", str(data), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)["runs"][0]["conversations"]["conv-99"]
    assert again["random"] == r
    argv = ["--data", str(data), "--json", "--seed", "7", "--random-draws", "2"]
    assert locomo.main(argv) == 0
    other = json.loads(capsys.readouterr().out)
    assert (other["seed"], other["random_draws"]) == (7, 2)
    seeds = [x["seed"] for x in other["runs"][0]["conversations"]["conv-99"]["random"]["per_draw"]]
    assert seeds == [7, 8]


def _picks(locomo: ModuleType, n: int = 40) -> list[Any]:
    """Candidates of varied lengths, each from its own turn, in no particular id order."""
    rng = random.Random(1234)
    ids = list(range(1, n + 1))
    rng.shuffle(ids)
    return [locomo.Pick(i, "x" * rng.randint(5, 80), frozenset({f"D1:{i}"})) for i in ids]


def test_random_selection_respects_the_budget_and_the_seed(locomo: ModuleType):
    picks = _picks(locomo)
    budget, overhead = 400, 12.5
    results = {}
    for seed in range(10):
        taken = locomo.random_selection(picks, budget, overhead, seed)
        spent = sum(len(p.text) + overhead for p in taken)
        assert 0 < len(taken) < len(picks) and spent <= budget
        # The procedure: ordered by id, shuffled with Random(seed), taken until the next
        # one would exceed the budget.
        order = sorted(picks, key=lambda p: p.id)
        random.Random(seed).shuffle(order)
        assert taken == order[: len(taken)]
        assert spent + len(order[len(taken)].text) + overhead > budget
        # Same seed, same selection, whatever order the candidates come in.
        assert locomo.random_selection(picks, budget, overhead, seed) == taken
        assert locomo.random_selection(picks[::-1], budget, overhead, seed) == taken
        results[seed] = tuple(p.id for p in taken)
    assert len(set(results.values())) > 1  # different seeds can differ
    assert locomo.random_selection(picks, 0, overhead, 0) == []
    everything = sum(len(p.text) + overhead for p in picks)
    assert len(locomo.random_selection(picks, everything, overhead, 3)) == len(picks)


def test_framing_is_memory_chars_beyond_entry_text_per_entry(locomo: ModuleType):
    assert locomo.framing(100, ["abc", "defg"]) == (100 - 7) / 2
    assert locomo.framing(0, []) == locomo.DEFAULT_OVERHEAD == 30
    assert locomo.framing(5, ["a longer entry text"]) == 0  # never negative
    # The date and speaker the deterministic path writes are framing, in either form.
    for dated in ("2026-03-08 abc", "2026-03-08 The agent: abc", "2026-03-08 — the user: abc"):
        assert locomo.framing(100, [dated, "The agent: defg"]) == (100 - 7) / 2, dated


def test_random_baseline_scores_its_selection_like_the_entries(locomo: ModuleType, tmp_path: Path):
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([sample()]))
    (conv,) = locomo.load(data, None)
    picks = [
        locomo.Pick(1, "teal", frozenset({"D2:2"})),  # QA 1 (all), QA 2 (any), fact 3
        locomo.Pick(2, "pixel", frozenset({"D1:3"})),  # QA 2 (any), fact 2
        locomo.Pick(3, "hello", frozenset({"D1:1"})),  # nothing scored
    ]
    everything = locomo.random_baseline(conv, picks, 10_000, 10.0, seed=0, draws=3)
    assert everything["per_draw"][0] | {"seed": 0} == {
        "seed": 0,
        "selected": 3,
        "cost": 4 + 5 + 5 + 30.0,
        "qa_any": 2,
        "qa_all": 2,
        "recall_evidence": 2,
    }
    assert everything == locomo.random_baseline(conv, picks, 10_000, 10.0, seed=0, draws=3)
    assert (everything["qa_any"], everything["qa_all"], everything["recall_evidence"]) == (2, 2, 2)
    assert locomo.coverage({"D2:2", "D1:3", "D1:1"}, conv) == {
        "qa_any": 2,
        "qa_all": 2,
        "recall_evidence": 2,
    }
    nothing = locomo.random_baseline(conv, picks, 0, 10.0, seed=0, draws=2)
    assert (nothing["selected"], nothing["qa_any"], nothing["recall_evidence"]) == (0, 0, 0)
    # One candidate fits: the mean over draws is of whichever each seed drew first.
    one = locomo.random_baseline(conv, picks, 15, 10.0, seed=0, draws=4)
    assert all(d["selected"] == 1 and d["cost"] <= 15 for d in one["per_draw"])
    first = {1: (2, 1, 1), 2: (1, 0, 1), 3: (0, 0, 0)}
    drawn = [
        first[locomo.random_selection(picks, 15, 10.0, d["seed"])[0].id] for d in one["per_draw"]
    ]
    assert [(d["qa_any"], d["qa_all"], d["recall_evidence"]) for d in one["per_draw"]] == drawn
    assert one["qa_any"] == sum(x[0] for x in drawn) / 4


def test_small_talk_is_an_entry_no_question_or_fact_rests_on(locomo: ModuleType, tmp_path: Path):
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([sample()]))
    (conv,) = locomo.load(data, None)
    # Every category's evidence counts, 5 (adversarial) included; unknown ids do not.
    assert conv.qa_turns == {"D2:2", "D1:3", "D1:1"}
    topical = set(conv.qa_turns) | {d for ob in conv.observations for d in ob.dia_ids}
    entries = [
        ("Hi Bob! How have you been lately?", {"D1:1"}),  # category-5 evidence: not small talk
        ("Bob likes teal.", {"D1:2"}),  # a gold observation's turn
        ("Quick update from my side of things.", {"D2:1"}),  # nothing rests on it
        ("Pixel and the quick update.", {"D2:1", "D1:3"}),  # one topical turn is enough
        ("No evidence at all.", set()),  # no turn: small talk
    ]
    assert locomo.small_talk(entries, topical) == [
        "Quick update from my side of things.",
        "No evidence at all.",
    ]
    assert locomo.small_talk([], topical) == []


def test_missing_data_skips_with_a_reason(
    locomo: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    assert locomo.main(["--data", str(tmp_path / "absent.json")]) == 0
    assert "not found" in capsys.readouterr().err


@pytest.fixture
def labels_mod(locomo: ModuleType) -> ModuleType:
    return sys.modules["_labels"]  # imported by bench/locomo.py from bench/


def _write_labels(path: Path, rows: list[tuple[str, str, str]]) -> Path:
    """A labels file (conversation, statement, label), headed like the real one."""
    digest = sys.modules["_labels"].digest
    lines = ["# how these were made", "conversation\tturns\tdigest\tlabel"]
    lines += [f"{conv}\tD1:1\t{digest(text)}\t{label}" for conv, text, label in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_labelled_small_talk_matches_statements_not_prefixes(
    labels_mod: ModuleType, tmp_path: Path
):
    path = _write_labels(
        tmp_path / "labels.tsv",
        [
            ("conv-1", "I adopted a grey cat called Pixel last weekend.", "memory"),
            ("conv-1", "Wow, that sounds amazing!", "smalltalk"),
            ("conv-1", "Here's a pic from the beach.", "smalltalk"),
            ("conv-2", "My sister lives in Lisbon.", "memory"),
        ],
    )
    labels = labels_mod.load(path)
    assert [lb.label for lb in labels] == ["memory", "smalltalk", "smalltalk", "memory"]
    tonight = [
        # Another night's date, other whitespace and case, a key comment: the same statement.
        ("conv-1", "2023-06-01 — the user: I adopted a  grey cat\ncalled PIXEL last weekend."),
        ("conv-1", "- 2023-05-08 — the user: Wow, that sounds amazing! <!-- m:0123abcd -->"),
        ("conv-1", "Something nobody labelled."),
        ("conv-1", "My sister lives in Lisbon."),  # labelled, but in another conversation
        ("conv-1", "I adopted a grey cat called Pixel last weekend and a dog."),  # another text
    ]
    assert labels_mod.rescore(tonight, labels) == {
        "matched": 2,
        "unmatched": 3,
        "small_talk": 1,
        "share": 0.5,
    }
    assert labels_mod.rescore([], labels) == {
        "matched": 0,
        "unmatched": 0,
        "small_talk": 0,
        "share": None,
    }
    assert labels_mod.statement("2023-05-08 — the user: A  b\tC.") == "a b c."
    bad = tmp_path / "bad.tsv"
    bad.write_text("conversation\tturns\tdigest\tlabel\nconv-1\tD1:1\tabc\tmaybe\n")
    with pytest.raises(ValueError, match="maybe"):
        labels_mod.load(bad)


def test_the_committed_labels_sample_every_conversation(labels_mod: ModuleType):
    labels = labels_mod.load()
    assert len(labels) >= 200
    per = {lb.conversation for lb in labels}
    assert len(per) == 10
    assert len({(lb.conversation, lb.digest) for lb in labels}) == len(labels)
    assert {lb.label for lb in labels} == {"memory", "smalltalk"}
    header = labels_mod.LABELS.read_text(encoding="utf-8").splitlines()[0]
    assert header.startswith("# Hand labels")


def test_the_bench_reports_the_labelled_share(
    locomo: ModuleType,
    labels_mod: ModuleType,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
):
    fact = "I adopted a small grey cat called Pixel last weekend."
    path = _write_labels(tmp_path / "labels.tsv", [("conv-99", fact, "memory")])
    monkeypatch.setattr(labels_mod, "LABELS", path)
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([sample()]))
    assert locomo.main(["--data", str(data), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["labels"] == 1
    (run,) = doc["runs"]
    d = run["conversations"]["conv-99"]
    assert d["labelled"]["matched"] == 1 and d["labelled"]["small_talk"] == 0
    assert d["labelled"]["matched"] + d["labelled"]["unmatched"] == d["entries"]
    assert d["labelled"]["share"] == 0.0
    assert run["overall"]["labelled"] == d["labelled"]
    text = locomo.render(doc)
    assert "small talk (labelled)" in text and "labelled: matched/unmatched" in text
