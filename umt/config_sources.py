"""Where umt's settings come from, without the settings models: the config file (which one, its
TOML), the ``UMT_*`` variables, the defaults' folders, and the warnings about them.

Free of pydantic, so that the finish hook (``umt.config_hook``) reads the same file and variables
with the same messages as :func:`umt.config.load_settings` without building the models.
"""

from __future__ import annotations

import difflib
import os
import shlex
import tomllib
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from umt.engine import mask_database_url
from umt.textsafe import is_utf8

APP_NAME: Final = "umt"
CONFIG_ENV_VAR: Final = "UMT_CONFIG"

#: Setting (``section.key``) -> environment variable. Users and scripts rely on these names.
ENV_VARS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "database.url": "UMT_DATABASE_URL",
        "qbittorrent.url": "UMT_QBITTORRENT_URL",
        "qbittorrent.username": "UMT_QBITTORRENT_USERNAME",
        "qbittorrent.password": "UMT_QBITTORRENT_PASSWORD",
        "qbittorrent.download_dir": "UMT_DOWNLOAD_DIR",
        "qbittorrent.category": "UMT_CATEGORY",
        "qbittorrent.timeout": "UMT_QBITTORRENT_TIMEOUT",
        "qbittorrent.path_map": "UMT_QBITTORRENT_PATH_MAP",
        "qbittorrent.reconcile_interval": "UMT_QBITTORRENT_RECONCILE_INTERVAL",
        "library.dir": "UMT_LIBRARY_DIR",
        "library.import_mode": "UMT_IMPORT_MODE",
        "library.naming_template": "UMT_LIBRARY_NAMING_TEMPLATE",
        "library.all_files": "UMT_LIBRARY_ALL_FILES",
        "library.verify": "UMT_LIBRARY_VERIFY",
        "library.file_mode": "UMT_LIBRARY_FILE_MODE",
        "library.dir_mode": "UMT_LIBRARY_DIR_MODE",
        "library.group": "UMT_LIBRARY_GROUP",
        "acquire.retention": "UMT_RETENTION",
        "acquire.download_timeout": "UMT_ACQUIRE_DOWNLOAD_TIMEOUT",
        "acquire.stall_timeout": "UMT_ACQUIRE_STALL_TIMEOUT",
        "engine.lease": "UMT_ENGINE_LEASE",
        "engine.poll_interval": "UMT_ENGINE_POLL_INTERVAL",
        "engine.sqlite_poll_interval": "UMT_ENGINE_SQLITE_POLL_INTERVAL",
        "engine.signal_ttl": "UMT_ENGINE_SIGNAL_TTL",
        "engine.concurrency": "UMT_ENGINE_CONCURRENCY",
        "engine.schema": "UMT_ENGINE_SCHEMA",
        "notify.urls": "UMT_NOTIFY_URLS",
        "notify.attempts": "UMT_NOTIFY_ATTEMPTS",
        "notify.retry_interval": "UMT_NOTIFY_RETRY_INTERVAL",
    }
)

_GROUP_OR_OTHER_READABLE: Final = 0o044


class ConfigError(Exception):
    """Unusable configuration; the one-line message names the file, key or variable."""

    exit_code = 2  # bad input, as the command line reports it



def default_data_dir() -> Path:
    import platformdirs  # here: a config that names its files does not need it

    return Path(platformdirs.user_data_dir(APP_NAME))


def default_config_path() -> Path:
    import platformdirs

    return Path(platformdirs.user_config_dir(APP_NAME)) / "config.toml"


def resolve_config_path(
    config_path: Path | None = None, *, env: Mapping[str, str] | None = None
) -> Path | None:
    """The config file to read, or None when no file is given and the default one is absent."""
    environ = os.environ if env is None else env
    if config_path is not None:
        return existing_file(Path(config_path), "--config")
    if environ.get(CONFIG_ENV_VAR):
        return existing_file(Path(environ[CONFIG_ENV_VAR]), CONFIG_ENV_VAR)
    default = default_config_path()
    return default if default.exists() else None


def existing_file(path: Path, given_by: str) -> Path:
    path = path.expanduser()
    if not path.exists():
        raise ConfigError(f"config file {path} (given by {given_by}) does not exist")
    return path


def read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as file:
            return tomllib.load(file)
    except IsADirectoryError:
        raise ConfigError(f"config file {path} is a directory, not a TOML file") from None
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise ConfigError(f"cannot read config file {path}: {reason}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"invalid TOML in {path}: the file is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"invalid TOML in {path}: {error}") from None


def did_you_mean(name: str, candidates: list[str]) -> str:
    leaf = name.rpartition(".")[2]
    same_leaf = [c for c in candidates if c.rpartition(".")[2] == leaf and c != name]
    close = same_leaf or difflib.get_close_matches(name, candidates, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def env_values(environ: Mapping[str, str]) -> dict[str, dict[str, str]]:
    values: dict[str, dict[str, str]] = {}
    for dotted, name in ENV_VARS.items():
        value = environ.get(name)
        if value:
            if not is_utf8(value):
                raise ConfigError(f"environment variable {name} is not valid UTF-8")
            section, key = dotted.split(".")
            values.setdefault(section, {})[key] = value
    return values


def url_has_password(url: str) -> bool:
    return mask_database_url(url) != url


def secret_keys(file_data: Mapping[str, Any]) -> tuple[str, ...]:
    keys: list[str] = []
    database_url = file_data.get("database", {}).get("url")
    if isinstance(database_url, str) and url_has_password(database_url):
        keys.append("database.url")
    if file_data.get("qbittorrent", {}).get("password"):
        keys.append("qbittorrent.password")
    notify = file_data.get("notify")
    if isinstance(notify, dict) and notify.get("urls"):
        keys.append("notify.urls")
    servers = file_data.get("media_servers")
    if isinstance(servers, list) and any(isinstance(t, dict) and t.get("token")
                                         for t in servers):
        keys.append("media_servers.token")
    return tuple(keys)


def file_permission_warnings(path: Path | None, secrets: tuple[str, ...]) -> list[str]:
    """Warn when the config file holds a password (``secrets``: its keys) and other users can
    read it."""
    if path is None or not secrets or os.name == "nt":
        return []
    try:
        mode = path.stat().st_mode
    except OSError:
        return []
    if not mode & _GROUP_OR_OTHER_READABLE:
        return []
    held = " and ".join(secrets)
    return [
        f"config file {path} holds {held} and is readable by other users"
        f" (mode {mode & 0o777:o}); fix: chmod 600 {shlex.quote(str(path))}"
    ]


def env_warnings(env: Mapping[str, str] | None = None) -> list[str]:
    """Name ``UMT_*`` variables that umt does not know (typos would otherwise pass silently)."""
    environ = os.environ if env is None else env
    known = [*ENV_VARS.values(), CONFIG_ENV_VAR]
    return [
        f"environment variable {name} is not a umt setting and is ignored"
        f"{did_you_mean(name, known)}"
        for name in sorted(environ)
        if name.startswith("UMT_") and name not in known
    ]
