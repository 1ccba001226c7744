"""The settings the finish hook needs, read without the settings models when that is safe.

qBittorrent runs the hook for every torrent it finishes, and importing pydantic and building
``umt.config``'s models is most of its start-up. :func:`hook_settings` reads the same file and
``UMT_*`` variables (``umt.config_sources``) and returns the database settings only when every
value present is one the full :class:`umt.config.Settings` certainly accepts, checked with the
same plain functions (``umt.config_values``, the engine's URL and duration parsers). Anything
else (a value it cannot vouch for, a setting it does not know, an unreadable file, a warning to
give) answers None: the caller then loads the full settings, which refuse or warn in their own
words. So this never refuses anything itself and never accepts what the full settings refuse;
``tests/test_config_hook.py`` compares the two on generated configurations.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from umt.config_sources import (
    ConfigError,
    default_data_dir,
    env_values,
    env_warnings,
    file_permission_warnings,
    read_toml,
    resolve_config_path,
    secret_keys,
)
from umt.config_values import TEN_YEARS, check_schema, duration, http_url, off
from umt.engine import parse_database_url

#: Values the models accept that are read here too (a subset of theirs: a value left out only
#: sends the hook to the full settings). The test holds them to ``umt.media``'s words.
IMPORT_MODES = frozenset({"auto", "hardlink", "copy"})
VERIFY_MODES = frozenset({"pieces", "sha256", "size"})
DEFAULT_NAMING_TEMPLATE = "{title}/{path}"
_BOOLEAN_TEXT = {"true": True, "false": False, "1": True, "0": False}
_DIGITS = re.compile(r"[0-9]{1,4}")


@dataclass(frozen=True)
class HookSettings:
    """What opening the engine takes, as ``umt.config.Settings`` would give it."""

    database_url: str
    engine_schema: str = "umt"
    concurrency: int = 4
    sqlite_poll_interval: timedelta = timedelta(seconds=0.2)
    lease: timedelta = timedelta(seconds=30)
    signal_ttl: timedelta = timedelta(days=7)


def hook_settings(config_path: Path | None = None, *,
                  env: Mapping[str, str] | None = None) -> HookSettings | None:
    """The database settings of ``config_path`` (else ``$UMT_CONFIG`` or the default file) and
    the environment; None when only the full settings can tell (see the module's text)."""
    environ = os.environ if env is None else env
    try:
        path = resolve_config_path(config_path, env=environ)
        file_data = read_toml(path) if path is not None else {}
        from_env = env_values(environ)
    except ConfigError:
        return None
    if env_warnings(environ) or file_permission_warnings(path, secret_keys(file_data)):
        return None
    values = _values(file_data, from_env)
    if values is None:
        return None
    checked: dict[str, Any] = {}
    for dotted, value in values.items():
        check = _CHECKS.get(dotted)
        if check is None:
            return None
        try:
            checked[dotted] = check(value)
        except (ValueError, TypeError):
            return None
    url = checked.get("database.url") or f"sqlite:///{default_data_dir() / 'umt.db'}"
    return HookSettings(url, **{_ENGINE_FIELDS[key]: value for key, value in checked.items()
                                if key in _ENGINE_FIELDS})


def _values(file_data: Mapping[str, Any],
            from_env: Mapping[str, Mapping[str, str]]) -> dict[str, Any] | None:
    """Every setting given, as ``section.key`` -> value, a variable over the file's value."""
    values: dict[str, Any] = {}
    for section, table in file_data.items():
        if section not in _SECTIONS or not isinstance(table, dict):
            return None  # ``[[media_servers]]``, an unknown section or a misplaced key
        values.update({f"{section}.{key}": value for key, value in table.items()})
    for section, table in from_env.items():
        values.update({f"{section}.{key}": value for key, value in table.items()})
    return values


# --------------------------------------------------------------------------- plain checks


def _text(value: object) -> str:
    if not isinstance(value, str) or "\0" in value:
        raise ValueError("not text")
    return value


def _non_empty(value: object) -> str:
    if not _text(value).strip():
        raise ValueError("empty")
    return str(value)


def _one_of(words: frozenset[str]) -> Callable[[object], str]:
    def check(value: object) -> str:
        if value not in words:
            raise ValueError("not one of the words read here")
        return str(value)

    return check


def _only(expected: object) -> Callable[[object], object]:
    def check(value: object) -> object:
        if value != expected or type(value) is not type(expected):
            raise ValueError("not the value read here")
        return value

    return check


def _boolean(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value in _BOOLEAN_TEXT:
        return _BOOLEAN_TEXT[value]
    raise ValueError("not a boolean read here")


def _integer(low: int, high: int) -> Callable[[object], int]:
    def check(value: object) -> int:
        if isinstance(value, str) and _DIGITS.fullmatch(value):
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise ValueError("not an integer in range")
        return value

    return check


def _duration(low: timedelta, high: timedelta, *, positive: bool = False,
              optional: bool = False) -> Callable[[object], timedelta | None]:
    def check(value: object) -> timedelta | None:
        if isinstance(value, str):
            _text(value)
        elif not isinstance(value, int | float) or isinstance(value, bool):
            raise ValueError("not a duration read here")
        if optional and off(value) is None:
            return None
        parsed = duration(value)
        if not isinstance(parsed, timedelta) or not low <= parsed <= high or (
                positive and parsed <= timedelta(0)):
            raise ValueError("out of range")
        return parsed

    return check


def _database_url(value: object) -> str:
    return parse_database_url(_text(value)).url


def _qbittorrent_url(value: object) -> str:
    return http_url(_text(value), example="", credentials="")


_ZERO, _SECOND, _HOUR = timedelta(0), timedelta(seconds=1), timedelta(hours=1)

_CHECKS: Mapping[str, Callable[[object], object]] = {
    "database.url": _database_url,
    "qbittorrent.url": _qbittorrent_url,
    "qbittorrent.username": _text,
    "qbittorrent.password": _text,
    "qbittorrent.download_dir": _text,
    "qbittorrent.category": _non_empty,
    "qbittorrent.timeout": _duration(_ZERO, timedelta(minutes=10), positive=True),
    "qbittorrent.path_map": _only([]),
    "qbittorrent.reconcile_interval": _duration(_ZERO, _HOUR, positive=True, optional=True),
    "library.dir": _non_empty,
    "library.import_mode": _one_of(IMPORT_MODES),
    "library.naming_template": _only(DEFAULT_NAMING_TEMPLATE),
    "library.all_files": _boolean,
    "library.verify": _one_of(VERIFY_MODES),
    "acquire.retention": _duration(_ZERO, TEN_YEARS),
    "acquire.download_timeout": _duration(_ZERO, TEN_YEARS, positive=True),
    "acquire.stall_timeout": _duration(_ZERO, TEN_YEARS, positive=True, optional=True),
    "engine.lease": _duration(_SECOND, _HOUR),
    "engine.poll_interval": _duration(_ZERO, _HOUR, positive=True),
    "engine.sqlite_poll_interval": _duration(_ZERO, _HOUR, positive=True),
    "engine.signal_ttl": _duration(_ZERO, TEN_YEARS, positive=True),
    "engine.concurrency": _integer(1, 64),
    "engine.schema": lambda value: check_schema(_text(value)),
    "notify.urls": _only([]),
    "notify.attempts": _integer(1, 20),
    "notify.retry_interval": _duration(_ZERO, _HOUR, positive=True),
}
_SECTIONS = frozenset(dotted.partition(".")[0] for dotted in _CHECKS)
#: The engine's settings the hook passes on, by the name ``HookSettings`` gives them.
_ENGINE_FIELDS = {"engine.schema": "engine_schema", "engine.concurrency": "concurrency",
                  "engine.sqlite_poll_interval": "sqlite_poll_interval",
                  "engine.lease": "lease", "engine.signal_ttl": "signal_ttl"}
