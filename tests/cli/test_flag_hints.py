"""An Inspect AI user's flag gets the `proctor run` flag that does the same job, and every hint
names a flag or a -M key that exists."""

from __future__ import annotations

import pytest
import typer

from proctor.agent.cli import main
from proctor.agent.cli.app import app
from proctor.agent.cli.flag_hints import INSPECT_FLAGS
from proctor.agent.inputs.model_overrides import BUDGET_SETTINGS, MODEL_SETTINGS


def _run_options() -> set[str]:
    # typer vendors its own click: the group is read by its attributes, not by click's classes.
    run = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    return {name for param in run.params for name in getattr(param, "opts", [])}


@pytest.mark.parametrize(("flag", "replacement"), sorted(INSPECT_FLAGS.items()))
def test_every_hint_names_something_real_and_inspects_flag_is_not_ours(flag: str, replacement: str) -> None:
    options = _run_options()
    assert flag not in options  # else it would never reach the error
    first, _, rest = replacement.partition(" ")
    assert first in options
    if first == "-M":
        assert rest.split("=", 1)[0] in {*MODEL_SETTINGS, *BUDGET_SETTINGS}


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--epochs", "3"], "No such option: --epochs; Inspect's --epochs is --trials N here"),
        (["--log-dir=logs"], "No such option: --log-dir; Inspect's --log-dir is --out DIR here"),
        (["--temperature", "0.5"], "Inspect's --temperature is -M temperature=VALUE here"),
        (["--max-connections", "4"], "Inspect's --max-connections is -M max_connections=N"),
    ],
)
def test_inspects_flags_get_a_hint(
    argv: list[str], expected: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.argv", ["proctor", "run", *argv])
    with pytest.raises(SystemExit) as exited:
        main()
    err = capsys.readouterr().err
    assert exited.value.code == 2 and expected in err and err.count("\n") == 1
    # click's spelling guess would point at another flag than the one that does the job.
    assert "Possible options" not in err


def test_a_plain_typo_keeps_clicks_guesses(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.argv", ["proctor", "run", "--trails", "3"])
    with pytest.raises(SystemExit):
        main()
    err = capsys.readouterr().err
    assert "No such option: --trails" in err and "--trials" in err and "Inspect" not in err
