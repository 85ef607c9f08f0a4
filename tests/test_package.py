"""The package root is the library API: every name in `__all__` resolves, lazily."""

from __future__ import annotations

import subprocess
import sys

import dreaming


def test_every_exported_name_resolves_to_what_its_module_defines() -> None:
    assert set(dreaming.__all__) == set(dreaming._EXPORTS) | {"__version__"}
    for name in dreaming.__all__:
        value = getattr(dreaming, name)
        assert value is not None, name
        assert name in dir(dreaming)
    assert dreaming.forget_sessions.__module__ == "dreaming.runner_forget"
    assert issubclass(dreaming.LockedError, dreaming.StateError)
    assert issubclass(dreaming.StateError, dreaming.DreamingError)


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        dreaming.no_such_thing  # noqa: B018
    except AttributeError as err:
        assert "no_such_thing" in str(err)
    else:
        raise AssertionError("expected AttributeError")


def test_importing_the_package_loads_no_pipeline_module() -> None:
    code = "import sys, dreaming; print(sorted(m for m in sys.modules if m.startswith('dreaming')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['dreaming']"


def test_a_night_through_the_root_api(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from dreaming import demo

    root = demo.build(tmp_path / "state")
    app = dreaming.App.open(root, root / "dreaming.toml", env={})
    try:
        results = dreaming.run(app, [dreaming.Phase.LIGHT, dreaming.Phase.DEEP], ["main"])
        [result] = results
        assert isinstance(result, dreaming.AgentResult)
        assert result.outcome == dreaming.Outcome.OK
        assert result.light is not None and result.light.corpus_lines > 0
        assert result.deep is not None and result.deep.actions["add"] > 0
        assert result.to_dict()["phases"]["deep"]["run_id"] == result.run_id
    finally:
        app.close()
