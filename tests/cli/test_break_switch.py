"""UMT_ENGINE_BREAK (the spikes' breakages, spikes/breakages.py): the command line must not call it
an unknown setting that "is ignored"."""

from __future__ import annotations

from tests.cli.conftest import Cli


def test_the_engine_break_switch_is_not_reported_as_an_unknown_setting(cli: Cli) -> None:
    result = cli.invoke("tables", env={"UMT_ENGINE_BREAK": ""})
    assert result.exit_code == 0
    assert "UMT_ENGINE_BREAK" not in result.stderr
    typo = cli.invoke("tables", env={"UMT_ENGINE_BRAKE": "x"})
    assert "UMT_ENGINE_BRAKE is not a umt setting" in typo.stderr
