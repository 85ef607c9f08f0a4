"""`dreaming report`: the HTML page of a real night, as its text and as headless Chromium
renders it (network disabled), on fresh states, and the small pieces it is drawn with."""

from __future__ import annotations

import os
import re
import shutil
import socket
import struct
import subprocess
import threading
from collections.abc import Iterator
from datetime import UTC, date, datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from dreaming import report, runner
from dreaming.cli import cli
from dreaming.memory import memory_file as mf
from tests.deep_helpers import build_state, candidate_texts, ids_in, open_app
from tests.fake_openai import FakeOpenAI, Reply
from tests.openclaw_builder import append

HOSTILE = "Remember that my locker code is 4411 <script>alert('pwned')</script> at the gym."
MERGED = "The user is allergic to peanuts and tree nuts."
SUPERSEDING = "The user's daily standup is at 11am on weekdays."
STANDUP_LINE = "I moved my standup: it is at 11am now, not 10am, every weekday."
REQUIRE_CHROMIUM = "DREAMING_REQUIRE_CHROMIUM"  # CI: a missing browser fails, never skips


# -- a real night: the model adds, a person deletes a line, the model merges and supersedes --


def _add_all(request: dict[str, Any]) -> Reply:
    cids, _ = ids_in(request)
    texts = candidate_texts(request)
    return Reply(
        {
            "decisions": [
                {
                    "candidate": c,
                    "action": "add",
                    "targets": [],
                    "reason": "a lasting fact about the user",
                    # Markup in model text is refused (invariant 7): the model writes none.
                    "text": "The user said: "
                    + re.sub(r"<[^>]*>", "", texts.get(c, c)).rstrip(".")
                    + ".",
                }
                for c in cids
            ]
        }
    )


def _merge_and_supersede(request: dict[str, Any]) -> Reply:
    cids, eids = ids_in(request)
    decisions: list[dict[str, Any]] = []
    if len(eids) < 2:  # REM's diary (not the deep prompt): refused, the diary falls back
        return Reply({"decisions": decisions})
    for i, cid in enumerate(cids):
        if i == 0:
            decisions.append(
                {
                    "candidate": cid,
                    "action": "merge",
                    "targets": [eids[0]],
                    "reason": "the same allergy, now with tree nuts",
                    "text": MERGED,
                }
            )
        elif i == 1:
            decisions.append(
                {
                    "candidate": cid,
                    "action": "supersede",
                    "targets": [eids[1]],
                    "reason": "the standup moved to 11am",
                    "text": SUPERSEDING,
                }
            )
        else:
            decisions.append(
                {"candidate": cid, "action": "skip", "targets": [], "text": None, "reason": "-"}
            )
    return Reply({"decisions": decisions})


def llm_night(root: Path, fake: FakeOpenAI) -> dict[str, str]:
    """Two LLM nights on the demo state. Returns the texts the assertions look for."""
    build_state(root, base_url=fake.base_url)
    config = root / "dreaming.toml"
    config.write_text(
        config.read_text().replace(
            '[deep]\nllm = "test"\n', '[deep]\nllm = "test"\nmax_retire_fraction = 0.9\n'
        )
        + "\n[budget]\ndaily_max_usd = 0.02\ndaily_max_tokens = 12000\n"
    )
    sessions = root / "agents/main/sessions"
    append(sessions / "s-main-06.jsonl", "user", HOSTILE, datetime(2026, 3, 19, tzinfo=UTC), "h1")
    fake.default = _add_all
    app = open_app(root)
    try:
        runner.run(app, ["light", "rem", "deep"])
    finally:
        app.close()
    memory = root / "workspace" / "MEMORY.md"
    removed = mf.read(memory).blocks[-1]
    memory.write_text(memory.read_text().replace(removed.raw, ""))  # a person deletes a line
    append(
        sessions / "s-main-06.jsonl",
        "user",
        "Remember I am allergic to peanuts and tree nuts.",
        datetime(2026, 3, 20, tzinfo=UTC),
        "n1",
    )
    append(
        sessions / "s-main-07.jsonl",
        "user",
        STANDUP_LINE,
        datetime(2026, 3, 20, 10, tzinfo=UTC),
        "n2",
    )
    fake.default = _merge_and_supersede
    app = open_app(root)
    try:
        runner.run(app, ["light", "rem", "deep"])
    finally:
        app.close()
    return {"removed": removed.text}


def invoke(root: Path | None, *args: str) -> Result:
    from dreaming.cli import _report  # noqa: F401  (registers)

    base = [] if root is None else ["--state-dir", str(root)]
    if root is not None and (root / "dreaming.toml").exists():
        base += ["--config", str(root / "dreaming.toml")]
    return CliRunner().invoke(cli, [*base, *args])


def write_report(root: Path, out: Path, *args: str) -> str:
    result = invoke(root, "report", "--out", str(out), *args)
    assert result.exit_code == 0, result.output
    return out.read_text(encoding="utf-8")


# Where a page could fetch something: any of these is a network load or a script.
RESOURCE = re.compile(
    r"<script|<link|<iframe|<object|<embed|@import|url\(|\bsrc\s*=|\bhref\s*=\s*(?![\"']?#)",
    re.IGNORECASE,
)


def assert_self_contained(html: str) -> None:
    assert "http://" not in html and "https://" not in html
    found = RESOURCE.findall(html)
    assert not found, found
    assert "Content-Security-Policy" in html and "default-src 'none'" in html


# -- the page as text (both backends) -----------------------------------------------------------


@pytest.mark.usefixtures("backend")
def test_report_of_an_llm_night(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    root = tmp_path / "s"
    texts = llm_night(root, fake_openai)
    html = write_report(root, tmp_path / "report.html")
    assert_self_contained(html)
    # Transcript text is hostile: the evidence line is there, escaped, and nothing runs.
    assert "&lt;script&gt;alert(" in html
    assert "<script" not in html.lower()
    for agent in ("main", "bob"):
        assert f'<section class="agent" id="agent-{agent}">' in html
        assert f"<h2>Agent {agent}</h2>" in html
    main = html[html.index('id="agent-main"') :]
    tonight = main[main.index('id="agent-main-tonight"') : main.index('id="agent-main-memory"')]
    # Tonight: the merge and the supersede with their diffs, path and reason; what retired.
    assert "Merged (1)" in tonight and "Superseded (1)" in tonight
    assert MERGED.replace("'", "&#39;") in tonight and SUPERSEDING.replace("'", "&#39;") in tonight
    assert "<del>" in tonight and "<ins>" in tonight
    assert '<span class="badge llm">LLM</span>' in tonight
    assert "the same allergy, now with tree nuts" in tonight
    assert "the standup moved to 11am" in tonight
    assert "Retired (3)" in tonight
    assert "removed by a person" in tonight
    assert texts["removed"].replace("'", "&#39;") in tonight
    # Lineage: every live entry has an anchor in the index and an article with its evidence.
    app = open_app(root)
    try:
        with app.engine("main").connect() as conn:
            from dreaming.memory.lineage import live_entries

            live = live_entries(conn, "main")
    finally:
        app.close()
    for key, _ in live:
        anchor = report.anchor("main", "entry", key)
        assert f'href="#{anchor}"' in main and f'id="{anchor}"' in main
    assert STANDUP_LINE in main  # an evidence line's corpus text
    assert "[main/sessions/main/s-main-07#L" in main
    assert "LLM call #" in main and "fake-model" in main
    assert "&#34;decisions&#34;" in main  # the model's reply, in a collapsed block
    # Kept out: sessions by reason and the candidate funnel.
    kept = main[main.index('id="agent-main-kept-out"') : main.index('id="agent-main-spend"')]
    assert "internal:cron" in kept and "policy:hookExternalContentSources=gmail" in kept
    assert "Candidate funnel" in kept and "<code>agent-only</code>" in kept
    # Spend: the chart with the daily cap drawn, and the runs with their outcomes.
    spend = main[main.index('id="agent-main-spend"') :]
    assert '<svg class="chart"' in spend and '<line class="cap"' in spend
    assert "daily_max_usd $0.02" in spend
    assert re.search(r'<span class="badge (ok|degraded)">(ok|degraded)</span>', spend)
    # --since: every run since the date, both nights' changes; a later date has none.
    since = write_report(root, tmp_path / "since.html", "--agent", "main", "--since", "2000-01-01")
    assert re.search(r"Added \(\d+\)", since)
    assert "Since 2000-01-01" in since and 'id="agent-bob"' not in since
    later = write_report(root, tmp_path / "later.html", "--since", "2999-01-01")
    assert "No run with a deep phase since 2999-01-01." in later


def test_report_to_stdout_and_a_clean_error_for_an_unknown_agent(tmp_path: Path) -> None:
    root = build_state(tmp_path / "s")
    app = open_app(root)
    try:
        runner.run(app, ["light", "rem", "deep"])
    finally:
        app.close()
    result = invoke(root, "report", "--out", "-", "--agent", "bob")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("<!doctype html>") and "<h2>Agent bob</h2>" in result.stdout
    assert "Agent main" not in result.stdout
    result = invoke(root, "report", "--out", str(tmp_path / "x.html"), "--agent", "nobody")
    assert result.exit_code == 2
    assert result.stderr.startswith("dreaming: error: unknown agent(s): nobody")
    assert not (tmp_path / "x.html").exists()
    # A link is not followed: its target (here someone's notes) stays as it was.
    notes = tmp_path / "notes.md"
    notes.write_text("mine\n")
    (tmp_path / "link.html").symlink_to(notes)
    result = invoke(root, "report", "--out", str(tmp_path / "link.html"))
    assert result.exit_code != 0 and "symbolic link" in result.stderr
    assert notes.read_text() == "mine\n" and (tmp_path / "link.html").is_symlink()


def test_report_of_fresh_states(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    html = write_report(empty, tmp_path / "empty.html")
    assert_self_contained(html)
    assert "No agent has state yet" in html and "No runs yet" in html
    # Transcripts on disk, never run: the named agent gets its section, saying so.
    from dreaming import demo

    fresh = demo.build(tmp_path / "fresh")
    html = write_report(fresh, tmp_path / "fresh.html", "--agent", "main")
    assert_self_contained(html)
    assert "<h2>Agent main</h2>" in html and "No runs yet" in html


# -- the pieces ---------------------------------------------------------------------------------


def test_word_diff_reads_as_whole_phrases() -> None:
    parts = report.word_diff("The user is allergic to peanuts, please remember that.", MERGED)
    assert "".join(t for op, t in parts if op != "ins") == (
        "The user is allergic to peanuts, please remember that."
    )
    assert "".join(t for op, t in parts if op != "del") == MERGED
    assert ("del", ", please remember that") in parts and ("ins", " and tree nuts") in parts
    assert report.word_diff("same", "same") == [("eq", "same")]


def test_anchors_keep_names_apart() -> None:
    assert report.anchor("agent", "a.b") != report.anchor("agent", "a_b")
    assert re.fullmatch(r"[A-Za-z0-9_-]+", report.anchor("x y", "m:0f", "<é>"))


def test_spend_chart_draws_the_cap_and_marks_days_over_it() -> None:
    days = [
        report.DaySpend(date(2026, 3, d), usd, 100 * d, d)
        for d, usd in ((1, 0.5), (2, 1.5), (3, 0))
    ]
    usd, tokens = report.spend_charts(days, 1.0, None)
    assert [b.over for b in usd.bars] == [False, True, False]
    assert usd.cap_y is not None and usd.top <= usd.cap_y <= usd.bottom
    assert usd.bars[1].height > usd.bars[0].height > 0 == usd.bars[2].height
    assert tokens.cap_y is None and tokens.cap_label == "no daily cap"
    quiet = report.spend_charts([report.DaySpend(date(2026, 3, 1), 0.0, 0, 0)], None, None)
    assert len(quiet) == 1 and quiet[0].empty


# -- as a person sees it: headless Chromium, network disabled -----------------------------------


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get(REQUIRE_CHROMIUM) == "1":
        pytest.fail(f"no chromium binary on PATH ({REQUIRE_CHROMIUM}=1)")
    pytest.skip("no chromium binary on PATH (Debian: apt-get install chromium)")


# Chromium's own background services (time, component updates, sign-in) still try to reach
# out through the proxy whatever the flags; they are the browser's, not the page's.
BROWSER_HOSTS = ("google.com", "googleapis.com", "gvt1.com", "gstatic.com")


class RecordingProxy:
    """A proxy on loopback that answers nothing: every request is written down and its
    connection closed. With the browser pointed at it, nothing reaches the network, and
    anything the page tried to fetch is on the list."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    head = conn.recv(512).decode("latin-1")
                except OSError:
                    continue
                self.requests.append(head.split("\r\n", 1)[0])

    def page_requests(self) -> list[str]:
        def host(line: str) -> str:
            target = line.split(" ")[1] if " " in line else line
            return re.sub(r"^\w+://", "", target).split("/")[0].split(":")[0]

        return [r for r in self.requests if r and not host(r).endswith(BROWSER_HOSTS)]

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._sock.close()


@pytest.fixture
def proxy() -> Iterator[RecordingProxy]:
    with RecordingProxy() as p:
        yield p


def browse(binary: str, proxy: RecordingProxy, profile: Path, page: Path, *args: str) -> str:
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        f"--proxy-server=127.0.0.1:{proxy.port}",
        "--proxy-bypass-list=<-loopback>",  # loopback goes through the proxy too
        "--window-size=1280,2000",
    ]
    done = subprocess.run(
        [binary, *flags, *args, page.as_uri()],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


class VisibleText(HTMLParser):
    """The text a reader sees without clicking: not inside a closed <details> (its
    <summary> excepted), not in <head>, <style> or an SVG <title>."""

    VOID = frozenset({"br", "hr", "img", "meta", "link", "input", "col", "area", "wbr"})

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[tuple[str, bool]] = []  # (tag, hides its content)
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.VOID:
            return
        closed = tag == "details" and "open" not in dict(attrs)
        self.stack.append((tag, closed or tag in ("head", "style", "title")))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        return

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                return

    def _hidden(self) -> bool:
        for i, (tag, hides) in enumerate(self.stack):
            if hides and tag == "details" and any(t == "summary" for t, _ in self.stack[i + 1 :]):
                continue  # a closed details shows its summary
            if hides:
                return True
        return False

    def handle_data(self, data: str) -> None:
        if not self._hidden():
            self.parts.append(data)

    @classmethod
    def of(cls, html: str) -> str:
        parser = cls()
        parser.feed(html)
        return " ".join(" ".join(parser.parts).split())


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_report_in_headless_chromium(
    tmp_path: Path, fake_openai: FakeOpenAI, proxy: RecordingProxy
) -> None:
    binary = chromium()
    root = tmp_path / "s"
    llm_night(root, fake_openai)
    page = tmp_path / "report.html"
    write_report(root, page)
    profile = tmp_path / "profile"
    dom = browse(binary, proxy, profile, page, "--dump-dom")
    shot = tmp_path / "report.png"
    browse(binary, proxy, profile, page, f"--screenshot={shot}")
    # Nothing left the machine: the page asked the network for nothing.
    assert proxy.page_requests() == []
    # The DOM as Chromium built it: the sections, in place and visible without a click.
    assert "<h2>Agent main</h2>" in dom and "<h2>Agent bob</h2>" in dom
    assert "<script" not in dom.lower()
    seen = VisibleText.of(dom)
    for text in (
        "dreaming report",
        "Agent main",
        "Tonight",
        "Merged (1)",
        "Superseded (1)",
        "the standup moved to 11am",
        "removed by a person",
        STANDUP_LINE,  # an evidence line of an entry's lineage
        "What was kept out, and why",
        "internal:cron",
        "Candidate funnel",
        "Spend and runs",
        "daily_max_usd $0.02",
    ):
        assert text in seen, text
    assert "<script>alert('pwned')</script>" in seen  # shown as text
    assert re.search(r'<svg class="chart"[^>]*>.*?<line class="cap"', dom, re.DOTALL)
    # The screenshot: the window's size, and not a blank page (a blank PNG is tiny).
    assert png_size(shot) == (1280, 2000)
    assert shot.stat().st_size > 40_000


def test_the_proxy_sees_a_page_that_reaches_out(tmp_path: Path, proxy: RecordingProxy) -> None:
    """The check above can fail: a page with a remote image and stylesheet is caught."""
    binary = chromium()
    page = tmp_path / "leaky.html"
    page.write_text(
        '<!doctype html><link rel="stylesheet" href="http://fonts.leak.invalid/x.css">'
        '<p>hi<img src="http://leak.invalid/pixel.png">'
    )
    browse(binary, proxy, tmp_path / "profile", page, "--dump-dom")
    assert any("leak.invalid" in r for r in proxy.page_requests()), proxy.requests


def test_the_package_exports_what_the_cli_and_tests_use() -> None:
    assert set(report.__all__) == {
        "AgentReport", "Call", "Change", "DaySpend", "Decision", "Entry", "FunnelStep",
        "Held", "KeptOut", "Origin", "Report", "Retired", "Session", "SessionGroup", "Spend",
        "Tonight", "agent_report", "anchor", "build_report", "render", "spend_charts",
        "word_diff",
    }  # fmt: skip
    for name in report.__all__:
        assert getattr(report, name) is not None
