"""Hermetic tests: state under tmp_path, no environment variable the code reads leaks in."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fake_openai import fake_openai_fixture  # noqa: F401  (provides the `fake_openai` fixture)

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

_ENV_VARS = (
    "DREAMING_STATE_DIR",
    "DREAMING_CONFIG",
    "DREAMING_STRIP_TAGS",
    "DREAMING_DEBUG",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    # The openai package reads these from os.environ whatever env we pass it; the HTTP
    # library follows the proxy variables.
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "OPENAI_ADMIN_KEY",
    "OPENAI_CUSTOM_HEADERS",
    "OPENAI_WEBHOOK_SECRET",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
)


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for name in _ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    yield


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not present at {SHARED_DATA}")
    return SHARED_DATA
