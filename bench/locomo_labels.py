"""Hand labels of LoCoMo entries: draw the sample to label, freeze it, show it.

    .venv/bin/python bench/locomo_labels.py sample --out /tmp/draft.tsv   # a night, a sample
    (label the draft's `label` column by hand: memory or smalltalk)
    .venv/bin/python bench/locomo_labels.py freeze /tmp/draft.tsv   # the fixture
    .venv/bin/python bench/locomo_labels.py show                    # labels beside texts

`sample` runs one night (schedule once, embedded default) over every conversation, as
bench/locomo.py does, and draws PER live entries of each conversation (its entries ordered by
key, shuffled with `random.Random(f"{seed}:{conversation}")`). The draft holds the texts, to
be read; the frozen fixture holds only their digests (`_labels.digest`), since LoCoMo is never
copied into the repository. `show` re-runs the night and prints every label with the text of
the entry it matches tonight (or its turn ids when nothing matches).
"""

from __future__ import annotations

import argparse
import csv
import random
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import _labels
import locomo
from _common import log

from dreaming.app import App
from dreaming.memory import lineage

PER = 25
SEED = 21

HEADER = """\
# Hand labels of LoCoMo entries, for the labelled small-talk share of bench/locomo.py.
# Drawn with `bench/locomo_labels.py sample` (seed {seed}, {per} live entries of each of the
# 10 conversations, one night, embedded default) from the output of commit {commit}
# ({entries} entries), then read and labelled one by one by hand:
#   memory    a fact about the people and their world (who they are, family, work, places,
#             possessions, plans), a standing instruction, a decision, an event with its
#             detail (what, where or when), worth reading on every turn
#   smalltalk small talk, reactions and feelings about the listener's news, fragments that
#             do not stand alone (an unresolved "it"/"this"/"that", a bare clause), photo
#             captions ("Here's a pic..."), generalisations and opinions about life
# Strict: a line that would need the conversation around it to mean something is small talk;
# a caption or a reply that states a lasting fact of its own ("This is my parents' wedding in
# 1993", "A gift from my grandma in my home country, Sweden") is memory.
# digest: SHA-256 (16 hex) of the normalised statement (bench/_labels.py), not its text, since
# LoCoMo (CC BY-NC 4.0) is not copied here; `bench/locomo_labels.py show` prints the texts.
"""


def entries(data: Path) -> list[tuple[str, str, str, str]]:
    """(conversation, key, text, turn ids) of every live entry after one night."""
    convs = locomo.load(data, None)
    root = Path(tempfile.mkdtemp(prefix="dreaming-labels-"))
    out: list[tuple[str, str, str, str]] = []
    try:
        state = root / "embedded"
        for conv in convs:
            locomo.write_conversation(state, conv, "both-user")
        app = App.open(state, None, env={})
        try:
            for conv in convs:
                locomo.night(app, conv.agent, None)
                with app.engine(conv.agent).connect() as conn:
                    for key, text in lineage.live_entries(conn, conv.agent):
                        ev = lineage.entry_lineage(conn, conv.agent, key).evidence
                        turns = sorted({conv.dia_of[e] for e in ev if e in conv.dia_of})
                        out.append((conv.agent, key, text, " ".join(turns)))
                log(f"labels: {conv.agent} done")
        finally:
            app.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


def draw(
    found: Sequence[tuple[str, str, str, str]], per: int, seed: int
) -> list[tuple[str, str, str, str]]:
    by_conv: dict[str, list[tuple[str, str, str, str]]] = {}
    for row in found:
        by_conv.setdefault(row[0], []).append(row)
    picked: list[tuple[str, str, str, str]] = []
    for conv in sorted(by_conv):
        rows = sorted(by_conv[conv], key=lambda r: r[1])
        random.Random(f"{seed}:{conv}").shuffle(rows)
        picked += sorted(rows[:per], key=lambda r: r[1])
    return picked


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=locomo.DATA, help="locomo10.json")
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sample", help="a night over all conversations and a draft to label")
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--per", type=int, default=PER)
    s.add_argument("--seed", type=int, default=SEED)
    f = sub.add_parser("freeze", help="a labelled draft -> the fixture (digests, no text)")
    f.add_argument("draft", type=Path)
    f.add_argument("--commit", default="?", help="the commit the sample was drawn from")
    f.add_argument("--entries", default="?", help="how many entries that output had")
    f.add_argument("--per", type=int, default=PER)
    f.add_argument("--seed", type=int, default=SEED)
    sub.add_parser("show", help="the labels beside tonight's texts")
    args = ap.parse_args(argv)
    if args.command == "freeze":
        with args.draft.open(encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh, delimiter="\t"))
        bad = [r for r in rows if r["label"] not in _labels.KINDS]
        if bad:
            log(f"labels: {len(bad)} rows unlabelled or mislabelled, e.g. {bad[0]}")
            return 1
        with _labels.LABELS.open("w", encoding="utf-8", newline="") as out:
            out.write(
                HEADER.format(
                    seed=args.seed, per=args.per, commit=args.commit, entries=args.entries
                )
            )
            w = csv.writer(out, delimiter="\t", lineterminator="\n")
            w.writerow(_labels.COLUMNS)
            for r in rows:
                w.writerow([r[c] for c in _labels.COLUMNS])
        log(f"labels: {len(rows)} written to {_labels.LABELS}")
        return 0
    if not args.data.is_file():
        log(f"labels: {args.data} not found (LoCoMo is read from ../shared/data)")
        return 0
    found = entries(args.data)
    if args.command == "sample":
        with args.out.open("w", encoding="utf-8", newline="") as out:
            w = csv.writer(out, delimiter="\t", lineterminator="\n")
            w.writerow([*_labels.COLUMNS, "text"])
            for conv, _key, text, turns in draw(found, args.per, args.seed):
                w.writerow([conv, turns, _labels.digest(text), "", _labels.bare(text)])
        log(f"labels: {len(found)} entries, sample in {args.out}")
        return 0
    tonight = {(c, _labels.digest(t)): t for c, _k, t, _ in found}
    for lb in _labels.load():
        text = tonight.get((lb.conversation, lb.digest))
        print(f"{lb.conversation}\t{lb.label}\t{text if text is not None else '? ' + lb.turns}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
