"""Shell completion (Typer's --install-completion / --show-completion), tested for bash."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

from tests.cli.conftest import UMT, Cli


def _complete(cli: Cli, words: str) -> list[str]:
    """What umt offers for the last of ``words``, asked as bash's completion function does."""
    done = cli.run(env={"_UMT_COMPLETE": "complete_bash", "COMP_WORDS": words,
                        "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1))})
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return done.stdout.split()


def _in_bash(cli: Cli, script: str, home: Path) -> subprocess.CompletedProcess[str]:
    # A command after umt keeps bash from exec-ing it: umt sees bash as its parent, the shell
    # whose completion it installs or shows.
    env = {**cli.subprocess_env(), "HOME": str(home), "SHELL": "/bin/bash",
           "PATH": f"{Path(UMT).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(["bash", "--norc", "-c", script], env=env, capture_output=True,
                          text=True, timeout=60, check=False)


def test_commands_and_options_are_completed(cli: Cli) -> None:
    assert _complete(cli, "umt sta") == ["start-acquire", "status"]
    assert "--log-file" in _complete(cli, "umt worker --lo")
    assert {"-v", "--verbose", "-q", "--quiet"} <= set(_complete(cli, "umt resume -"))
    assert _complete(cli, "umt db ") == ["migrate", "status", "gc"]
    assert not cli.db_path.exists()  # completing opens no database


def test_the_bash_script_is_valid_and_completes_in_bash(cli: Cli, tmp_path: Path) -> None:
    shown = _in_bash(cli, "umt --show-completion; exit $?", tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "complete -o default -F _umt_completion umt" in shown.stdout
    script = tmp_path / "umt.bash"
    script.write_text(shown.stdout)
    checked = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True,
                             check=False)
    assert (checked.returncode, checked.stderr) == (0, "")

    completed = _in_bash(cli, f"source {shlex.quote(str(script))}; COMP_WORDS=(umt sta); "
                              'COMP_CWORD=1; _umt_completion umt; printf "%s\\n" "${COMPREPLY[@]}"',
                         tmp_path)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split() == ["start-acquire", "status"]


def test_install_completion_sets_up_bash(cli: Cli, tmp_path: Path) -> None:
    installed = _in_bash(cli, "umt --install-completion; exit $?", tmp_path)
    assert installed.returncode == 0, installed.stderr
    assert "bash completion installed" in installed.stdout
    assert "_umt_completion" in (tmp_path / ".bash_completions" / "umt.sh").read_text()
    assert ".bash_completions/umt.sh" in (tmp_path / ".bashrc").read_text()
