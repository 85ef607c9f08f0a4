"""bench/locomo.py: the LoCoMo -> OpenClaw converter, its turn-id map, and a tiny end-to-end run
on hand-written LoCoMo-shaped data (the real data set is never needed here)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from dreaming.app import App

BENCH = Path(__file__).resolve().parents[1] / "bench" / "locomo.py"


@pytest.fixture(scope="module")
def locomo() -> ModuleType:
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
        app.run(["light"], ["conv-99"])
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


def test_missing_data_skips_with_a_reason(
    locomo: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    assert locomo.main(["--data", str(tmp_path / "absent.json")]) == 0
    assert "not found" in capsys.readouterr().err
