"""What a night keeps in memory about texts is dropped by a purge in the same process."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from dreaming import demo
from dreaming.cli import _forget, _run, cli  # noqa: F401  (register)
from dreaming.ingest import claims, salience


def test_a_purge_leaves_no_text_in_the_process_s_caches(tmp_path: Path) -> None:
    """A scheduler runs for weeks: what a night kept in memory about texts (their salience,
    their claims) is dropped when a purge runs in the same process."""
    root = demo.build(tmp_path / "demo")
    cli_ = CliRunner()
    assert cli_.invoke(cli, ["--state-dir", str(root), "run"]).exit_code == 0
    assert salience.assess.cache_info().currsize > 0
    claims.extract("My sister Anna lives in Lisbon.", min_words=3, max_words=40)
    done = cli_.invoke(
        cli, ["--state-dir", str(root), "forget", "--agent", "main", "--session", "s-main-01"]
    )
    assert done.exit_code == 0, done.output
    assert salience.assess.cache_info().currsize == 0
    assert claims._extract.cache_info().currsize == 0
