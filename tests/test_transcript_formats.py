"""The format table: every format registered once, claims disjoint, unknown kinds refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from dreaming.config import Settings, Source, SourceKind
from dreaming.errors import ConfigError
from dreaming.ingest import sources
from dreaming.ingest.transcripts import FORMATS, format_named
from dreaming.ingest.transcripts._detect import classify_line
from dreaming.messages import Format
from dreaming.paths import Paths

# Line types each format names itself by (with the shape the claim looks at).
SAMPLES: dict[Format, list[dict[str, object]]] = {
    Format.OPENCLAW: [{"type": "message", "message": {}}, {"type": "session"}],
    Format.CLAUDE_CODE: [{"type": "user", "message": {}}, {"type": "summary"}],
    Format.EVENT_LOG: [{"type": "user/message"}, {"type": "llm/request", "data": {}}],
}


def test_source_kind_is_the_format_name() -> None:
    assert SourceKind is Format
    assert set(FORMATS) == set(Format)


@pytest.mark.parametrize("fmt", list(Format))
def test_each_sample_is_claimed_by_its_format_only(fmt: Format) -> None:
    for obj in SAMPLES[fmt]:
        line_type = str(obj["type"])
        claiming = [f.name for f in FORMATS.values() if f.claims(line_type, obj)]
        assert claiming == [fmt]
        assert classify_line(obj) is fmt


def test_an_unknown_kind_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no transcript format 'chatgpt'"):
        format_named("chatgpt")
    # A kind the table lacks reaches discovery only by bypassing validation; it is still
    # refused, not read as some other format.
    src = Source.model_construct(kind="chatgpt", path=tmp_path, agent="a", per_project=None)
    settings = Settings(read_state_dir=False).model_copy(update={"sources": (src,)})
    with pytest.raises(ConfigError, match="known: claude-code, event-log, openclaw"):
        sources.discover(Paths(tmp_path / "state", settings))
