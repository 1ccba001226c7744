"""The finish hook's reading of the settings (``umt.config_hook``) never disagrees with the full
settings: when it answers, the full settings accept the same file and variables without a
warning and give the same database settings; when the full settings refuse, it does not answer
(the hook then takes the full path, which refuses in its own words, exit 2)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, get_args

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import umt.config_sources as config_sources
from umt.config import ENV_VARS, ConfigError, Settings, load_settings, permission_warnings
from umt.config_hook import (
    DEFAULT_NAMING_TEMPLATE,
    IMPORT_MODES,
    VERIFY_MODES,
    HookSettings,
    hook_settings,
)
from umt.config_sources import env_warnings
from umt.media.importing.words import ImportMode, VerifyMode
from umt.media.naming import DEFAULT_TEMPLATE

EXAMPLE = Path(__file__).resolve().parent.parent / "config.example.toml"


@pytest.fixture(autouse=True)
def no_default_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config_sources, "default_config_path",
                        lambda: tmp_path / "default-config" / "config.toml")


def expected(full: Settings) -> HookSettings:
    return HookSettings(full.database_url(), full.engine.db_schema, full.engine.concurrency,
                        full.engine.sqlite_poll_interval, full.engine.lease,
                        full.engine.signal_ttl)


def full_settings(path: Path | None, env: dict[str, str]) -> Settings | None:
    try:
        return load_settings(path, env=env)
    except ConfigError:
        return None


def agree(path: Path | None, env: dict[str, str]) -> HookSettings | None:
    fast = hook_settings(path, env=env)
    full = full_settings(path, env)
    if fast is not None:
        assert full is not None, "the hook accepted what the full settings refuse"
        assert permission_warnings(full) == [] and env_warnings(env) == []
        assert fast == expected(full)
    return fast


def test_the_words_read_here_are_the_models_words() -> None:
    assert set(get_args(ImportMode)) >= IMPORT_MODES
    assert set(get_args(VerifyMode)) >= VERIFY_MODES
    assert DEFAULT_NAMING_TEMPLATE == DEFAULT_TEMPLATE


def test_defaults_agree(tmp_path: Path) -> None:
    assert agree(None, {}) == expected(Settings())


def test_the_example_config_is_read_without_the_models(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    text = EXAMPLE.read_text()
    assert text.count("\n[database]\n") == 1
    config.write_text(text.replace("\n[database]\n",
                                   f'\n[database]\nurl = "sqlite:///{tmp_path}/x.db"\n'))
    config.chmod(0o600)
    fast = agree(config, {})
    assert fast is not None and fast.database_url == f"sqlite:///{tmp_path}/x.db"


@pytest.mark.parametrize(("text", "env"), [
    ('[library]\nverify = "bogus"\n', {}),
    ('[engine]\nlease = "2h"\n', {}),
    ('[acquire]\nretention = "11y"\n', {}),
    ('[database]\nurl = "mysql://nowhere"\n', {}),
    ("[engine]\nconcurrency = 65\n", {}),
    ('[libary]\ndir = "/srv"\n', {}),
    ("[nosuchsection]\n", {}),
    ('[engine]\nschema = "pg_umt"\n', {}),
    ("", {"UMT_ENGINE_LEASE": "0s"}),
    ("", {"UMT_LIBRARY_ALL_FILES": "maybe"}),
    ("", {"UMT_DATABASE_URL": "sqlite://"}),
], ids=lambda value: json.dumps(value)[:40])
def test_what_the_full_settings_refuse_is_left_to_them(tmp_path: Path, text: str,
                                                       env: dict[str, str]) -> None:
    config = tmp_path / "config.toml"
    config.write_text(text)
    assert full_settings(config, env) is None
    assert hook_settings(config, env=env) is None


def test_a_warning_is_left_to_the_full_settings(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[qbittorrent]\npassword = "hunter2"\n')
    config.chmod(0o644)
    assert hook_settings(config, env={}) is None  # readable by others: the full path warns
    config.chmod(0o600)
    assert hook_settings(config, env={}) is not None
    assert hook_settings(config, env={"UMT_DATABSE_URL": "x"}) is None  # an unknown variable


# --------------------------------------------------------------------------- generated


TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
JUNK = st.one_of(TEXT, st.integers(-2, 10**6), st.booleans(),
                 st.floats(allow_nan=True, allow_infinity=True),
                 st.lists(st.integers(0, 3), max_size=2))
DURATIONS = st.sampled_from(["10s", "0", "off", "OFF", "0s", "1h", "61m", "3600", "3601",
                             "1:30", "PT15M", "P7D", "P11Y", " 5m ", "-1s", "0.5", "abc", "",
                             "3650d", "3651d", "1s", "0.9s", "10m", "11m", "1d\0"])
PLAIN: dict[str, list[str]] = {
    "database.url": ["sqlite:///{tmp}/x.db", "sqlite:///rel.db", "sqlite://",
                     "sqlite:///:memory:", "postgresql://u:p@h/db", "postgres://h/db",
                     "mysql://x", "sqlite://host/x.db", "sqlite:///a?b", "SQLITE:///{tmp}/y.db"],
    "qbittorrent.url": ["http://127.0.0.1:8080", "https://h", "ftp://x", "http://u:p@h",
                        "http://", "localhost:8080"],
    "qbittorrent.category": ["umt", "", " ", "films"],
    "library.dir": ["/srv/library", "", "  ", "~/films", "rel"],
    "library.import_mode": ["auto", "hardlink", "copy", "Auto", "link"],
    "library.verify": ["pieces", "sha256", "size", "none", "SIZE"],
    "library.all_files": ["true", "false", "1", "0", "yes", "True", "on", "2"],
    "library.naming_template": ["{title}/{path}", "{title}", "/x", "{}"],
    "library.file_mode": ["0640", "0200", "x"],
    "engine.concurrency": ["4", "64", "65", "0", "007", " 4", "4.0", "-1"],
    "notify.attempts": ["1", "20", "21", "0", "5"],
    "engine.schema": ["umt", "pg_x", "Umt", "a" * 55, "a" * 56, "_x", "1x"],
    "qbittorrent.path_map": ["/a=/b", "", " ", "x"],
    "notify.urls": ["ntfys://ntfy.sh/t", "", "x"],
}
_DURATION_KEYS = {key for key in ENV_VARS if key.split(".")[1] in {
    "timeout", "reconcile_interval", "retention", "download_timeout", "stall_timeout", "lease",
    "poll_interval", "sqlite_poll_interval", "signal_ttl", "retry_interval"}}


def _env_value(key: str) -> st.SearchStrategy[str]:
    plain = DURATIONS if key in _DURATION_KEYS else (
        st.sampled_from(PLAIN[key]) if key in PLAIN else TEXT)
    return st.one_of(plain, TEXT).filter(lambda text: "\0" not in text)


def _file_value(key: str) -> st.SearchStrategy[Any]:
    typed: st.SearchStrategy[Any] = st.nothing()
    if key in _DURATION_KEYS:
        typed = st.one_of(st.integers(-1, 4000), st.floats(-1, 4000), st.just(0))
    elif key in ("engine.concurrency", "notify.attempts"):
        typed = st.one_of(st.integers(-1, 70), st.sampled_from([4.0, True]))
    elif key == "library.all_files":
        typed = st.one_of(st.booleans(), st.integers(0, 2))
    elif key in ("qbittorrent.path_map", "notify.urls"):
        typed = st.sampled_from([[], [""], ["/a=/b"]])
    return st.one_of(_env_value(key), typed, JUNK)


KEYS = [*ENV_VARS, "library.nosuch", "nosuch.key"]
FILES = st.dictionaries(st.sampled_from(KEYS), st.none(), max_size=8).flatmap(
    lambda chosen: st.fixed_dictionaries({key: _file_value(key) for key in chosen}))
ENVS = st.dictionaries(st.sampled_from(list(ENV_VARS)), st.none(), max_size=4).flatmap(
    lambda chosen: st.fixed_dictionaries({key: _env_value(key) for key in chosen}))


_SAMPLES: dict[str, list[Any]] = {
    "durations": ["10s", "0", "off", "OFF", "0s", "1h", "61m", "3600", "3601", "1:30", "PT15M",
                  "P7D", "P11Y", " 5m ", "-1s", "0.5", "0.9s", "abc", "", "3650d", "3651d",
                  "1s", "10m", "11m", "1d\0", 0, 1, 0.5, 600, 601, 3600, 3601, -1, 0.0, 1e300,
                  float("nan"), True, [1]],
    "integers": ["4", "64", "65", "0", "007", " 4", "4.0", "-1", "1", "20", "21", 1, 20, 21, 64,
                 65, 0, 4.0, True, "x"],
    "booleans": ["true", "false", "1", "0", "yes", "True", "on", "2", "", True, False, 0, 1],
    "texts": ["", " ", "a", "a\0b", "/srv/library", "~/films", 5, True, [], ["a"]],
}


def _samples(key: str) -> list[Any]:
    if key in _DURATION_KEYS:
        return _SAMPLES["durations"]
    if key in ("engine.concurrency", "notify.attempts"):
        return _SAMPLES["integers"]
    if key == "library.all_files":
        return _SAMPLES["booleans"]
    return [*PLAIN.get(key, []), *_SAMPLES["texts"], [], [""]]


def test_each_setting_alone_agrees(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every setting with each of its sample values, from the file and from its variable."""
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "config.toml"
    answered = 0
    for key in ENV_VARS:
        for value in _samples(key):
            _write(config, {key: value}, tmp_path)
            answered += agree(config, {}) is not None
            text = value.replace("{tmp}", str(tmp_path)) if isinstance(value, str) else value
            if isinstance(text, str) and text and "\0" not in text:
                config.write_text("")
                answered += agree(config, {ENV_VARS[key]: text}) is not None
    assert answered > 200  # most keys' good values are read without the models


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    return json.dumps(value)


def _write(path: Path, values: dict[str, Any], tmp: Path) -> None:
    sections: dict[str, list[str]] = {}
    for dotted, value in values.items():
        section, key = dotted.split(".")
        if isinstance(value, str):
            value = value.replace("{tmp}", str(tmp))
        sections.setdefault(section, []).append(f"{key} = {_toml(value)}")
    path.write_text("".join(f"[{name}]\n" + "\n".join(lines) + "\n\n"
                            for name, lines in sections.items()), encoding="utf-8")
    path.chmod(0o600)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(file_values=FILES, env_values=ENVS, readable=st.booleans(), server=st.booleans())
@example(file_values={"database.url": "sqlite:///{tmp}/x.db", "engine.lease": "1m"},
         env_values={"engine.concurrency": "8"}, readable=False, server=False)
def test_the_hook_reads_what_the_full_settings_read(
        tmp_path_factory: pytest.TempPathFactory, file_values: dict[str, Any],
        env_values: dict[str, str], readable: bool, server: bool) -> None:
    tmp = tmp_path_factory.mktemp("hook-settings")
    config = tmp / "config.toml"
    _write(config, file_values, tmp)
    if server:
        with config.open("a") as file:
            file.write('[[media_servers]]\nkind = "jellyfin"\nurl = "http://h:8096"\n'
                       'token = "secret-token"\n')
    if readable:
        config.chmod(0o644)
    env = {ENV_VARS[key]: value.replace("{tmp}", str(tmp)) for key, value in env_values.items()}
    cwd = os.getcwd()
    os.chdir(tmp)  # relative SQLite paths are pinned to the working folder, in both
    try:
        agree(config, env)
    finally:
        os.chdir(cwd)
