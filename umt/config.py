"""umt settings: built-in defaults, overridden by a TOML file, overridden by ``UMT_*`` variables.

Use :func:`load_settings`; every problem it finds is a :class:`ConfigError` with a one-line
message naming the file, key or variable. ``config.example.toml`` documents every setting.
"""

from __future__ import annotations

import grp
import os
import re
import string
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
)

from umt.config_sources import (
    CONFIG_ENV_VAR,
    ENV_VARS,
    ConfigError,
    default_config_path,
    default_data_dir,
    did_you_mean,
    env_values,
    env_warnings,
    file_permission_warnings,
    read_toml,
    resolve_config_path,
    secret_keys,
)
from umt.config_values import TEN_YEARS, check_schema, http_url, off
from umt.config_values import duration as _duration
from umt.engine import (
    DatabaseTarget,
    InvalidDatabaseUrl,
    format_duration,
    mask_database_url,
)
from umt.engine import parse_database_url as _parse_database_url
from umt.media.importing import ImportMode, VerifyMode
from umt.media.naming import DEFAULT_TEMPLATE, TemplateError, validate_template
from umt.textsafe import redact_url

__all__ = [
    "CONFIG_ENV_VAR",
    "ENV_VARS",
    "AcquireSettings",
    "ConfigError",
    "DatabaseSettings",
    "DatabaseTarget",
    "EngineSettings",
    "LibrarySettings",
    "MediaServerSettings",
    "NotifySettings",
    "QbittorrentSettings",
    "Settings",
    "default_config_path",
    "default_data_dir",
    "env_warnings",
    "load_settings",
    "mask_database_url",
    "parse_database_url",
    "permission_warnings",
    "resolve_config_path",
    "setting_keys",
]

_SECRET_KEYS: Final = frozenset({"database.url", "qbittorrent.password", "notify.urls"})
#: Keys whose value is a URL: shown only with userinfo and query values masked.
_URL_KEYS: Final = frozenset({"qbittorrent.url"})
#: Steps a worker executes at once; each holds a database connection.
MAX_CONCURRENCY: Final = 64
#: A value shown in an error message is cut to this many characters.
_SHOWN_CHARS: Final = 80


# --------------------------------------------------------------------------- database URLs


def parse_database_url(url: str, *, cwd: Path | None = None) -> DatabaseTarget:
    """See ``umt.engine.parse_database_url``; bad URLs become ``ConfigError``."""
    try:
        return _parse_database_url(url, cwd=cwd)
    except InvalidDatabaseUrl as exc:
        raise ConfigError(str(exc)) from None


# --------------------------------------------------------------------------- field types


def _positive(value: timedelta) -> timedelta:
    if value <= timedelta(0):
        raise ValueError("must be longer than zero")
    return value


def _at_most(limit: timedelta) -> AfterValidator:
    def check(value: timedelta) -> timedelta:
        if value > limit:
            raise ValueError(f"must be at most {format_duration(limit)}")
        return value

    return AfterValidator(check)


def _at_least(limit: timedelta) -> AfterValidator:
    def check(value: timedelta) -> timedelta:
        if value < limit:
            raise ValueError(f"must be at least {format_duration(limit)}")
        return value

    return AfterValidator(check)


Duration = Annotated[timedelta, BeforeValidator(_duration), _at_most(TEN_YEARS)]
PositiveDuration = Annotated[
    timedelta, BeforeValidator(_duration), AfterValidator(_positive), _at_most(TEN_YEARS)
]
LeaseDuration = Annotated[
    timedelta, BeforeValidator(_duration), _at_least(timedelta(seconds=1)),
    _at_most(timedelta(hours=1)),
]
IntervalDuration = Annotated[
    timedelta, BeforeValidator(_duration), AfterValidator(_positive),
    _at_most(timedelta(hours=1)),
]


#: A duration that can be switched off with ``off`` or 0 (None).
OptionalDuration = Annotated[PositiveDuration | None, BeforeValidator(off)]
OptionalInterval = Annotated[IntervalDuration | None, BeforeValidator(off)]
RequestTimeout = Annotated[
    timedelta, BeforeValidator(_duration), AfterValidator(_positive),
    _at_most(timedelta(minutes=10)),
]


def _non_empty(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


NonEmptyStr = Annotated[str, AfterValidator(_non_empty)]


def _media_server_url(value: str) -> str:
    return http_url(value, example="http://127.0.0.1:8096", credentials="token")


def _default_database_url() -> SecretStr:
    return SecretStr(f"sqlite:///{default_data_dir() / 'umt.db'}")


# --------------------------------------------------------------------------- sections


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_nul(cls, value: object) -> object:
        # A NUL cannot be part of a path, a URL or a database value: refuse it where it is read.
        if isinstance(value, str) and "\0" in value:
            raise ValueError("contains a NUL character")
        return value


class DatabaseSettings(_Section):
    url: SecretStr = Field(default_factory=_default_database_url)

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: SecretStr) -> SecretStr:
        try:
            target = parse_database_url(value.get_secret_value())
        except ConfigError as error:
            raise ValueError(str(error)) from None
        # Relative SQLite paths are pinned at load time so a later chdir cannot move the database.
        return SecretStr(target.url)


class PathMapping(_Section):
    """qBittorrent's path prefix (``remote``) and where umt sees it (``local``)."""

    remote: str
    local: str

    @field_validator("remote", "local")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"{value!r} is not an absolute path")
        if len(value) > 4096:
            raise ValueError("must be at most 4096 characters")
        return value


def _path_map(value: object) -> object:
    """``UMT_QBITTORRENT_PATH_MAP``: ``remote=local`` pairs separated by ``;``."""
    if not isinstance(value, str):
        return value
    pairs = []
    for item in filter(None, (part.strip() for part in value.split(";"))):
        remote, equals, local = item.partition("=")
        if not equals:
            raise ValueError(f"{item!r} is not remote=local (e.g. /downloads=/srv/torrents)")
        pairs.append({"remote": remote.strip(), "local": local.strip()})
    return pairs


class QbittorrentSettings(_Section):
    url: str = "http://127.0.0.1:8080"
    username: str = "admin"
    password: SecretStr | None = None
    download_dir: str | None = None
    category: NonEmptyStr = "umt"
    timeout: RequestTimeout = timedelta(seconds=10)
    path_map: Annotated[list[PathMapping], BeforeValidator(_path_map)] = Field(
        default_factory=list, max_length=100
    )
    #: How often ``umt worker`` lines waiting runs up with qBittorrent (None: never).
    reconcile_interval: OptionalInterval = timedelta(minutes=1)

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        return http_url(value, example="http://127.0.0.1:8080",
                         credentials="qbittorrent.username/password")

    @field_validator("download_dir")
    @classmethod
    def _empty_is_none(cls, value: str | None) -> str | None:
        # Not expanded or resolved here: the path is qBittorrent's, possibly on another machine.
        return value or None


_MAX_GID: Final = 2**32 - 2
_OCTAL_MODE: Final = re.compile(r"(?:0o)?([0-7]{3,4})", re.IGNORECASE)


def _octal_mode(needed: int, what: str) -> BeforeValidator:
    """An octal mode string (``"0640"``, ``"2775"``) that keeps ``needed`` for umt itself,
    normalised to four digits; empty is None (left as created)."""

    def check(value: object) -> object:
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise ValueError('write the mode as an octal string in quotes, e.g. "0640"')
        match = _OCTAL_MODE.fullmatch(value.strip())
        if match is None:
            raise ValueError(f"{value[:_SHOWN_CHARS]!r} is not an octal mode such as "
                             '"0640" or "2775"')
        mode = int(match.group(1), 8)
        if mode & needed != needed:
            raise ValueError(f"{match.group(1)} must give the owner (umt) {what} ({needed:o})")
        return f"{mode:04o}"

    return BeforeValidator(check)


def _group(value: object) -> object:
    """A group name that exists here or a numeric gid; empty is None (left as created)."""
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise ValueError("not a group name or numeric gid")
    text = value.strip()
    if text.isdigit():
        if int(text) > _MAX_GID:
            raise ValueError(f"gid {text[:_SHOWN_CHARS]} is out of range")
        return text
    try:
        grp.getgrnam(text)
    except (KeyError, ValueError):
        raise ValueError(f"no group {text[:_SHOWN_CHARS]!r} on this machine") from None
    return text


def group_id(group: str) -> int:
    """The gid of ``library.group`` (a name that exists here or a number)."""
    return int(group) if group.isdigit() else grp.getgrnam(group).gr_gid


class LibrarySettings(_Section):
    dir: Path = Field(default_factory=lambda: default_data_dir() / "library")
    import_mode: ImportMode = "auto"
    naming_template: str = DEFAULT_TEMPLATE
    all_files: bool = False
    verify: VerifyMode = "pieces"
    #: Mode of the files and folders imports create ("0640"); None: as the umask leaves them.
    file_mode: Annotated[str | None, _octal_mode(0o400, "read")] = None
    dir_mode: Annotated[str | None, _octal_mode(0o700, "read, write and search")] = None
    #: Group given to what imports create, a name or a gid; None: umt's own group.
    group: Annotated[str | None, BeforeValidator(_group)] = None

    @property
    def permissions(self) -> tuple[int | None, int | None, int | None]:
        """(file mode, folder mode, gid) as numbers."""
        return (
            int(self.file_mode, 8) if self.file_mode else None,
            int(self.dir_mode, 8) if self.dir_mode else None,
            group_id(self.group) if self.group else None,
        )

    @field_validator("dir", mode="before")
    @classmethod
    def _check_dir(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip():
            raise ValueError("must not be empty")
        return value

    @field_validator("dir")
    @classmethod
    def _absolute_dir(cls, value: Path) -> Path:
        return value.expanduser().absolute()

    @field_validator("naming_template")
    @classmethod
    def _check_template(cls, value: str) -> str:
        _check_naming_template(value)
        return value


def _check_naming_template(template: str) -> None:
    if not template.strip():
        raise ValueError("must not be empty")
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as error:
        raise ValueError(f"{template!r} is not a valid template: {error}") from None
    if any(name == "" or name.isdigit() for name in fields):
        raise ValueError(f"{template!r}: placeholders must be named, e.g. '{{title}}'")
    if template.startswith(("/", "\\")) or ".." in re.split(r"[/\\]", template):
        raise ValueError(f"{template!r} must stay inside the library (no leading '/', no '..')")
    try:
        validate_template(template)
    except TemplateError as error:
        raise ValueError(str(error)) from None


class AcquireSettings(_Section):
    retention: Duration = timedelta(days=7)
    download_timeout: PositiveDuration = timedelta(days=14)
    #: A download that makes no progress for this long fails its run (None: off).
    stall_timeout: OptionalDuration = None


class EngineSettings(_Section):
    lease: LeaseDuration = timedelta(seconds=30)
    poll_interval: IntervalDuration = timedelta(seconds=5)
    sqlite_poll_interval: IntervalDuration = timedelta(seconds=0.2)
    signal_ttl: PositiveDuration = timedelta(days=7)
    concurrency: int = Field(default=4, ge=1, le=MAX_CONCURRENCY)
    # "schema" would shadow BaseModel.schema(), hence the alias; the TOML key stays "schema".
    db_schema: str = Field(default="umt", alias="schema")

    @field_validator("db_schema")
    @classmethod
    def _check_schema(cls, value: str) -> str:
        return check_schema(value)


def _url_list(value: object) -> object:
    """A list, or text with the URLs separated by spaces or commas (UMT_NOTIFY_URLS)."""
    if isinstance(value, str):
        return [part for part in re.split(r"[\s,]+", value) if part]
    return value


_APPRISE_FORM: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\x00-\x1f\x7f]+")


def _apprise_form(value: SecretStr) -> SecretStr:
    # The full syntax check (Apprise's own) is 'umt doctor''s: importing Apprise here would
    # slow every command down.
    if not _APPRISE_FORM.fullmatch(value.get_secret_value()):
        raise ValueError("each must be an Apprise URL such as 'ntfys://ntfy.sh/topic'")
    if len(value.get_secret_value()) > 2000:
        raise ValueError("each must be at most 2000 characters")
    return value


class NotifySettings(_Section):
    #: Apprise URLs; they usually hold tokens and are never shown.
    urls: Annotated[
        list[Annotated[SecretStr, AfterValidator(_apprise_form)]], BeforeValidator(_url_list)
    ] = Field(default_factory=list, max_length=20)
    #: Tries of a media server scan or a message before the run goes on with a warning.
    attempts: int = Field(default=5, ge=1, le=20)
    #: The wait after the first failed try; each next wait is three times longer (30 min max).
    retry_interval: IntervalDuration = timedelta(seconds=10)


class MediaServerSettings(_Section):
    """One ``[[media_servers]]`` table: a Jellyfin, Emby or Plex server to tell about imports."""

    kind: Literal["jellyfin", "emby", "plex"]
    url: Annotated[str, AfterValidator(_media_server_url)]
    token: SecretStr
    #: How umt names the server in its ledger and messages (default: its kind).
    name: str | None = None
    #: Where this server sees library.dir (e.g. "/media" in its container); default: the same.
    library_path: str | None = None

    @field_validator("token")
    @classmethod
    def _check_token(cls, value: SecretStr) -> SecretStr:
        if not value.get_secret_value().strip():
            raise ValueError("must not be empty")
        if not value.get_secret_value().isprintable():
            raise ValueError("must be printable text")
        return value

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,39}", value):
            raise ValueError("1-40 letters, digits, '_', '.' or '-'")
        return value

    @field_validator("library_path")
    @classmethod
    def _check_library_path(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError("must be an absolute path, as the media server sees the library")
        return value

    @property
    def label(self) -> str:
        return self.name or self.kind


def _distinct_servers(servers: list[MediaServerSettings]) -> list[MediaServerSettings]:
    labels = [server.label for server in servers]
    twice = sorted({label for label in labels if labels.count(label) > 1})
    if twice:
        raise ValueError(f"two servers are called {twice[0]!r}: give each a distinct name")
    return servers


# --------------------------------------------------------------------------- settings


class Settings(BaseModel):
    """All of umt's settings. Build with :func:`load_settings`; ``Settings()`` is the defaults.

    A plain model, not pydantic-settings' ``BaseSettings``: :func:`load_settings` reads the file
    and the environment itself (the stable variable names, UMT_IMPORT_MODE ->
    library.import_mode, follow no nested-delimiter scheme, the environment must be injectable,
    and errors must say which file or variable was wrong), so that package would only add its
    import (asyncio, its CLI and cloud sources: a third of the finish hook's start-up).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    database: DatabaseSettings = Field(default_factory=DatabaseSettings)
    qbittorrent: QbittorrentSettings = Field(default_factory=QbittorrentSettings)
    library: LibrarySettings = Field(default_factory=LibrarySettings)
    acquire: AcquireSettings = Field(default_factory=AcquireSettings)
    engine: EngineSettings = Field(default_factory=EngineSettings)
    notify: NotifySettings = Field(default_factory=NotifySettings)
    media_servers: Annotated[
        list[MediaServerSettings], AfterValidator(_distinct_servers)
    ] = Field(default_factory=list, max_length=20)

    _config_file: Path | None = PrivateAttr(default=None)
    _secrets_in_file: tuple[str, ...] = PrivateAttr(default=())

    @property
    def config_file(self) -> Path | None:
        """The TOML file these settings were read from, if any."""
        return self._config_file

    @property
    def secrets_in_config_file(self) -> tuple[str, ...]:
        """Keys of the config file that hold a password (``qbittorrent.password``, …)."""
        return self._secrets_in_file

    def database_url(self) -> str:
        """The real database URL, password included: pass it to the driver, never print it."""
        return self.database.url.get_secret_value()

    def database_url_for_display(self) -> str:
        return mask_database_url(self.database_url())

    def database_target(self) -> DatabaseTarget:
        return parse_database_url(self.database_url())

    def effective_poll_interval(self) -> timedelta:
        """How often a worker polls for due work on this database kind."""
        if self.database_target().kind == "sqlite":
            return self.engine.sqlite_poll_interval
        return self.engine.poll_interval


_SECTIONS: Final[Mapping[str, type[BaseModel]]] = MappingProxyType(
    {
        "database": DatabaseSettings,
        "qbittorrent": QbittorrentSettings,
        "library": LibrarySettings,
        "acquire": AcquireSettings,
        "engine": EngineSettings,
        "notify": NotifySettings,
    }
)
#: Sections written as arrays of tables (``[[media_servers]]``): no ``UMT_*`` variables.
_LIST_SECTIONS: Final[Mapping[str, type[BaseModel]]] = MappingProxyType(
    {"media_servers": MediaServerSettings}
)


def _section_keys(section: str) -> list[str]:
    fields = _SECTIONS[section].model_fields
    return [info.alias or name for name, info in fields.items()]


def setting_keys() -> list[str]:
    """Every setting as ``section.key``, in declaration order."""
    return [f"{section}.{key}" for section in _SECTIONS for key in _section_keys(section)]


# --------------------------------------------------------------------------- loading


def load_settings(
    config_path: Path | None = None, *, env: Mapping[str, str] | None = None
) -> Settings:
    """Read settings: ``UMT_*`` variables > TOML file > defaults.

    The file is ``config_path`` (the CLI's ``--config``), else ``$UMT_CONFIG``, else the
    default path if it exists. An empty variable counts as unset.
    """
    environ = os.environ if env is None else env
    path = resolve_config_path(config_path, env=environ)
    file_data = read_toml(path) if path is not None else {}
    if path is not None:
        _check_known_keys(file_data, path)
    env_data = env_values(environ)
    settings = _validate(_merge(file_data, env_data), path, env_data)
    settings._config_file = path
    settings._secrets_in_file = secret_keys(file_data)
    return settings


def _check_known_keys(data: Mapping[str, Any], path: Path) -> None:
    for section, table in data.items():
        if section in _LIST_SECTIONS:
            _check_list_section(section, table, path)
            continue
        if section not in _SECTIONS:
            raise ConfigError(
                f"{path}: unknown section or key {section!r}"
                f"{did_you_mean(section, [*_SECTIONS, *setting_keys()])}; sections are "
                + ", ".join([*(f"[{name}]" for name in _SECTIONS),
                             *(f"[[{name}]]" for name in _LIST_SECTIONS)])
            )
        if not isinstance(table, dict):
            raise ConfigError(
                f"{path}: {section!r} must be a table: write [{section}] above its keys"
            )
        for key in table:
            if key not in _section_keys(section):
                hint = did_you_mean(f"{section}.{key}", setting_keys())
                raise ConfigError(f"{path}: unknown setting '{section}.{key}'{hint}")


def _check_list_section(section: str, tables: object, path: Path) -> None:
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ConfigError(
            f"{path}: {section!r} must be an array of tables: write [[{section}]] above the "
            "keys of each"
        )
    known = list(_LIST_SECTIONS[section].model_fields)
    for table in tables:
        for key in table:
            if key not in known:
                hint = did_you_mean(f"{section}.{key}", [f"{section}.{k}" for k in known])
                raise ConfigError(f"{path}: unknown setting '{section}.{key}'{hint}")


def _merge(
    file_data: Mapping[str, Any], env_data: Mapping[str, Mapping[str, str]]
) -> dict[str, Any]:
    merged: dict[str, Any] = {
        section: list(table) if section in _LIST_SECTIONS else dict(table)
        for section, table in file_data.items()
    }
    for section, table in env_data.items():
        merged.setdefault(section, {}).update(table)
    return merged


def _validate(
    data: dict[str, Any], path: Path | None, env_data: Mapping[str, Mapping[str, str]]
) -> Settings:
    try:
        return Settings(**data)
    except ValidationError as error:
        raise ConfigError(_describe(error, path, env_data)) from None


def _describe(
    error: ValidationError, path: Path | None, env_data: Mapping[str, Mapping[str, str]]
) -> str:
    problems = error.errors(include_url=False)
    first = problems[0]
    dotted = ".".join(str(part) for part in first["loc"][:2])
    message = first["msg"].removeprefix("Value error, ")
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    if first["loc"] and first["loc"][0] in _LIST_SECTIONS:
        # Never the value: a server's table holds its token.
        where = f"in {path}" if path is not None else "default"
        index = "".join(f"[{part}]" if isinstance(part, int) else f".{part}"
                        for part in first["loc"][1:3])
        return f"invalid setting {first['loc'][0]}{index} ({where}): {message}{more}"
    return (
        f"invalid setting {dotted}{_shown_input(dotted, first['input'])}"
        f" ({_origin(dotted, path, env_data)}): {message}{more}"
    )


def _origin(dotted: str, path: Path | None, env_data: Mapping[str, Mapping[str, str]]) -> str:
    section, _, key = dotted.partition(".")
    if key in env_data.get(section, {}):
        return f"from {ENV_VARS[dotted]}"
    return f"in {path}" if path is not None else "default"


def _shown_input(dotted: str, value: object) -> str:
    # Only plain scalars of non-secret keys: a table could carry a password along with it.
    if dotted in _SECRET_KEYS or not isinstance(value, str | int | float):
        return ""
    if dotted in _URL_KEYS and isinstance(value, str):
        value = redact_url(value)
    text = repr(value)
    return f" = {text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + '…'}"


# --------------------------------------------------------------------------- warnings


def permission_warnings(settings: Settings) -> list[str]:
    """Warn when the config file holds a password and other users can read it."""
    return file_permission_warnings(settings.config_file, settings.secrets_in_config_file)
