import grp
import os
import re
from datetime import timedelta
from pathlib import Path

import pytest

import umt.config as config
import umt.config_sources as config_sources
from tests.support.unprivileged import as_nobody, reachable_folder
from umt.config import (
    ENV_VARS,
    ConfigError,
    Settings,
    env_warnings,
    load_settings,
    mask_database_url,
    parse_database_url,
    permission_warnings,
    setting_keys,
)

EXAMPLE = Path(__file__).resolve().parent.parent / "config.example.toml"
SECRET = "hunter2-s3cret"


@pytest.fixture(autouse=True)
def no_default_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the default config path into tmp_path so the developer's own file never leaks in."""
    default = tmp_path / "default-config" / "config.toml"
    monkeypatch.setattr(config_sources, "default_config_path", lambda: default)
    return default


def write(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return path


def error_of(path: Path | None = None, /, **env: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load_settings(path, env=env)
    message = str(caught.value)
    assert "\n" not in message
    return message


# --------------------------------------------------------------------------- defaults, example


def test_defaults_without_any_file() -> None:
    settings = load_settings(env={})
    assert settings.config_file is None
    assert settings.qbittorrent.url == "http://127.0.0.1:8080"
    assert settings.qbittorrent.username == "admin"
    assert settings.qbittorrent.password is None
    assert settings.qbittorrent.category == "umt"
    assert settings.library.import_mode == "auto"
    assert settings.acquire.retention == timedelta(days=7)
    assert settings.engine.sqlite_poll_interval == timedelta(milliseconds=200)
    assert settings.engine.db_schema == "umt"
    target = settings.database_target()
    assert target.kind == "sqlite"
    assert target.sqlite_path is not None and target.sqlite_path.is_absolute()
    assert target.sqlite_path.name == "umt.db"
    assert settings.library.dir.is_absolute()
    assert settings.effective_poll_interval() == timedelta(milliseconds=200)


def test_example_file_equals_defaults() -> None:
    loaded = load_settings(EXAMPLE, env={})
    assert loaded.model_dump() == Settings().model_dump()


def test_example_file_documents_every_setting_with_its_env_var() -> None:
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()
    section = ""
    documented: dict[str, str] = {}
    in_tables: dict[str, list[str]] = {}
    for index, line in enumerate(lines):
        if header := re.fullmatch(r"\[(\w+)\]", line):
            section = header[1]
        elif header := re.fullmatch(r"# \[\[(\w+)\]\]", line):
            section = f"[[{header[1]}]]"
        elif assignment := re.match(r"#? ?(\w+) = ", line):
            if section.startswith("[["):
                in_tables.setdefault(section.strip("[]"), []).append(assignment[1])
            else:
                documented[f"{section}.{assignment[1]}"] = lines[index - 1]
    assert sorted(documented) == sorted(setting_keys())
    for key, comment in documented.items():
        assert f"({ENV_VARS[key]})" in comment, key
    assert {name: sorted(keys) for name, keys in in_tables.items()} == {
        name: sorted(model.model_fields) for name, model in config._LIST_SECTIONS.items()
    }


def test_every_setting_has_exactly_one_env_var() -> None:
    assert sorted(ENV_VARS) == sorted(setting_keys())
    assert len(set(ENV_VARS.values())) == len(ENV_VARS)


def test_env_var_names_users_rely_on() -> None:
    assert ENV_VARS["database.url"] == "UMT_DATABASE_URL"
    assert ENV_VARS["qbittorrent.url"] == "UMT_QBITTORRENT_URL"
    assert ENV_VARS["qbittorrent.username"] == "UMT_QBITTORRENT_USERNAME"
    assert ENV_VARS["qbittorrent.password"] == "UMT_QBITTORRENT_PASSWORD"
    assert ENV_VARS["library.dir"] == "UMT_LIBRARY_DIR"
    assert ENV_VARS["library.import_mode"] == "UMT_IMPORT_MODE"
    assert ENV_VARS["qbittorrent.download_dir"] == "UMT_DOWNLOAD_DIR"
    assert ENV_VARS["qbittorrent.category"] == "UMT_CATEGORY"
    assert ENV_VARS["acquire.retention"] == "UMT_RETENTION"


# --------------------------------------------------------------------------- precedence


def test_env_over_file_over_defaults(tmp_path: Path) -> None:
    path = write(
        tmp_path / "c.toml",
        '[qbittorrent]\nurl = "http://file:1"\nusername = "fileuser"\n'
        '[acquire]\nretention = "1d"\n',
    )
    settings = load_settings(
        path, env={"UMT_QBITTORRENT_URL": "http://env:2", "UMT_ENGINE_CONCURRENCY": "8"}
    )
    assert settings.qbittorrent.url == "http://env:2"  # env beats file
    assert settings.qbittorrent.username == "fileuser"  # file beats default
    assert settings.acquire.retention == timedelta(days=1)
    assert settings.engine.concurrency == 8  # env beats default
    assert settings.qbittorrent.category == "umt"  # default
    assert settings.config_file == path


def test_every_env_var_is_applied(tmp_path: Path) -> None:
    env = {
        "UMT_DATABASE_URL": "postgresql://u@db/umt",
        "UMT_QBITTORRENT_URL": "https://qb.example:8443",
        "UMT_QBITTORRENT_USERNAME": "me",
        "UMT_QBITTORRENT_PASSWORD": SECRET,
        "UMT_DOWNLOAD_DIR": "/srv/dl",
        "UMT_CATEGORY": "movies",
        "UMT_QBITTORRENT_TIMEOUT": "3s",
        "UMT_LIBRARY_DIR": str(tmp_path / "lib"),
        "UMT_IMPORT_MODE": "copy",
        "UMT_LIBRARY_NAMING_TEMPLATE": "{title} ({year})/{filename}",
        "UMT_LIBRARY_ALL_FILES": "true",
        "UMT_LIBRARY_VERIFY": "size",
        "UMT_RETENTION": "0",
        "UMT_ACQUIRE_DOWNLOAD_TIMEOUT": "P1D",
        "UMT_ENGINE_LEASE": "1m",
        "UMT_ENGINE_POLL_INTERVAL": "2s",
        "UMT_ENGINE_SQLITE_POLL_INTERVAL": "50",
        "UMT_ENGINE_SIGNAL_TTL": "1w",
        "UMT_ENGINE_CONCURRENCY": "2",
        "UMT_ENGINE_SCHEMA": "umt_test",
    }
    settings = load_settings(env=env)
    assert settings.database_url() == "postgresql://u@db/umt"
    assert settings.qbittorrent.password is not None
    assert settings.qbittorrent.password.get_secret_value() == SECRET
    assert settings.qbittorrent.download_dir == "/srv/dl"
    assert settings.qbittorrent.category == "movies"
    assert settings.qbittorrent.timeout == timedelta(seconds=3)
    assert settings.library.dir == tmp_path / "lib"
    assert settings.library.import_mode == "copy"
    assert settings.library.all_files is True
    assert settings.library.verify == "size"
    assert settings.acquire.retention == timedelta(0)
    assert settings.acquire.download_timeout == timedelta(days=1)
    assert settings.engine.lease == timedelta(minutes=1)
    assert settings.engine.sqlite_poll_interval == timedelta(seconds=50)
    assert settings.engine.signal_ttl == timedelta(weeks=1)
    assert settings.engine.concurrency == 2
    assert settings.engine.db_schema == "umt_test"
    assert settings.effective_poll_interval() == timedelta(seconds=2)


def test_empty_env_var_counts_as_unset(tmp_path: Path) -> None:
    path = write(tmp_path / "c.toml", '[qbittorrent]\ncategory = "tv"\n')
    assert load_settings(path, env={"UMT_CATEGORY": ""}).qbittorrent.category == "tv"


def test_toml_numbers_are_seconds(tmp_path: Path) -> None:
    path = write(tmp_path / "c.toml", "[engine]\nlease = 45\nsqlite_poll_interval = 0.5\n")
    settings = load_settings(path, env={})
    assert settings.engine.lease == timedelta(seconds=45)
    assert settings.engine.sqlite_poll_interval == timedelta(milliseconds=500)


# --------------------------------------------------------------------------- which file


def test_config_argument_wins_over_umt_config(tmp_path: Path) -> None:
    chosen = write(tmp_path / "a.toml", '[qbittorrent]\ncategory = "from-arg"\n')
    other = write(tmp_path / "b.toml", '[qbittorrent]\ncategory = "from-env"\n')
    settings = load_settings(chosen, env={"UMT_CONFIG": str(other)})
    assert settings.qbittorrent.category == "from-arg"


def test_umt_config_is_used(tmp_path: Path) -> None:
    path = write(tmp_path / "b.toml", '[qbittorrent]\ncategory = "from-env"\n')
    assert load_settings(env={"UMT_CONFIG": str(path)}).qbittorrent.category == "from-env"


def test_default_file_is_used_when_present(no_default_config: Path) -> None:
    no_default_config.parent.mkdir()
    write(no_default_config, '[qbittorrent]\ncategory = "default-file"\n')
    settings = load_settings(env={})
    assert settings.qbittorrent.category == "default-file"
    assert settings.config_file == no_default_config


def test_missing_config_argument_is_an_error(tmp_path: Path) -> None:
    message = error_of(tmp_path / "nope.toml")
    assert f"{tmp_path / 'nope.toml'} (given by --config) does not exist" in message


def test_missing_umt_config_file_is_an_error(tmp_path: Path) -> None:
    message = error_of(UMT_CONFIG=str(tmp_path / "nope.toml"))
    assert f"{tmp_path / 'nope.toml'} (given by UMT_CONFIG) does not exist" in message


# --------------------------------------------------------------------------- bad input


def test_invalid_toml(tmp_path: Path) -> None:
    path = write(tmp_path / "c.toml", "[engine]\nlease = \n")
    message = error_of(path)
    assert "invalid TOML" in message and str(path) in message and "line 2" in message


def test_non_utf8_file(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_bytes(b'[qbittorrent]\ncategory = "\xff"\n')
    assert "not UTF-8" in error_of(path)


def test_directory_instead_of_file(tmp_path: Path) -> None:
    assert "is a directory" in error_of(tmp_path)


def test_unreadable_file() -> None:
    """The kernel's own refusal, as an unprivileged user (root reads a mode-000 file)."""
    with reachable_folder() as folder:
        unreadable = write(folder / "c.toml", "")
        unreadable.chmod(0)
        readable = write(folder / "ok.toml", "[acquire]\nretention = '2d'\n")
        readable.chmod(0o644)

        def outcome(path: Path) -> str:
            try:
                return str(load_settings(path, env={}).acquire.retention)
            except ConfigError as exc:
                return str(exc)

        seen = as_nobody(lambda: [outcome(unreadable), outcome(readable)])
    assert seen == [f"cannot read config file {unreadable}: Permission denied", "2 days, 0:00:00"]


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ('[qbittorent]\nurl = "http://x"\n', ["unknown section", "'qbittorent'", "qbittorrent"]),
        ('url = "http://x"\n', ["unknown section or key 'url'", "[database]"]),
        ('retention = "1d"\n', ["'retention'", "did you mean 'acquire.retention'"]),
        ('[qbittorrent]\npasword = "x"\n', ["'qbittorrent.pasword'", "qbittorrent.password"]),
        ('[qbittorrent]\nretention = "1d"\n', ["'qbittorrent.retention'", "acquire.retention"]),
        ('[engine]\ndb_schema = "x"\n', ["'engine.db_schema'"]),
        ('qbittorrent = "x"\n', ["must be a table"]),
    ],
)
def test_unknown_keys_are_errors(tmp_path: Path, text: str, fragments: list[str]) -> None:
    message = error_of(write(tmp_path / "c.toml", text))
    for fragment in fragments:
        assert fragment in message


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ('[acquire]\nretention = "3x"\n', ["acquire.retention", "invalid duration '3x'"]),
        ('[acquire]\nretention = "-1d"\n', ["acquire.retention", "negative"]),
        ('[acquire]\nretention = "P1M"\n', ["acquire.retention", "fixed length"]),
        ("[acquire]\nretention = true\n", ["acquire.retention", "expected a duration"]),
        ('[engine]\nlease = "0s"\n', ["engine.lease", "at least 1s"]),
        ("[engine]\nconcurrency = 0\n", ["engine.concurrency", "greater than or equal to 1"]),
        ('[engine]\nschema = "Bad-Name"\n', ["engine.schema", "schema name"]),
        ('[engine]\nschema = "pg_umt"\n', ["engine.schema"]),
        ('[library]\nimport_mode = "move"\n', ["library.import_mode", "'move'", "hardlink"]),
        ('[library]\nverify = "md5"\n', ["library.verify"]),
        ('[library]\nall_files = "maybe"\n', ["library.all_files"]),
        ('[library]\ndir = ""\n', ["library.dir", "empty"]),
        ('[library]\nnaming_template = "{title"\n', ["library.naming_template", "template"]),
        ('[library]\nnaming_template = "{}/{0}"\n', ["library.naming_template", "named"]),
        ('[library]\nnaming_template = "../{title}"\n', ["library.naming_template", "inside"]),
        ('[library]\nnaming_template = "/abs/{title}"\n', ["library.naming_template", "inside"]),
        ('[library]\nnaming_template = "{title:02d}"\n', ["library.naming_template", "format"]),
        ('[library]\nfile_mode = "0648"\n', ["library.file_mode", "octal mode"]),
        ('[library]\nfile_mode = "rw-r-----"\n', ["library.file_mode", "octal mode"]),
        ("[library]\nfile_mode = 640\n", ["library.file_mode", "in quotes"]),
        ('[library]\nfile_mode = "0040"\n', ["library.file_mode", "owner"]),
        ('[library]\ndir_mode = "0640"\n', ["library.dir_mode", "owner", "search"]),
        ('[library]\ngroup = "no-such-group-umt"\n', ["library.group", "no group"]),
        ('[library]\ngroup = "99999999999"\n', ["library.group", "out of range"]),
        ('[qbittorrent]\nurl = "127.0.0.1:8080"\n', ["qbittorrent.url", "http(s) URL"]),
        ('[qbittorrent]\nurl = "http://u:p@host"\n', ["qbittorrent.url", "credentials"]),
        ('[qbittorrent]\ncategory = ""\n', ["qbittorrent.category", "empty"]),
        ('[database]\nurl = "mysql://x/db"\n', ["database.url", "unsupported database URL"]),
        ('[database]\nurl = "sqlite://"\n', ["database.url", "in-memory"]),
    ],
)
def test_bad_values_name_the_key_and_file(tmp_path: Path, text: str, fragments: list[str]) -> None:
    path = write(tmp_path / "c.toml", text)
    message = error_of(path)
    assert message.startswith("invalid setting ")
    assert f"in {path}" in message
    for fragment in fragments:
        assert fragment in message


def test_bad_env_value_names_the_variable() -> None:
    message = error_of(UMT_ENGINE_CONCURRENCY="many")
    assert "engine.concurrency" in message and "from UMT_ENGINE_CONCURRENCY" in message
    message = error_of(UMT_RETENTION="soon")
    assert "acquire.retention = 'soon'" in message and "from UMT_RETENTION" in message


def test_several_problems_are_counted(tmp_path: Path) -> None:
    path = write(tmp_path / "c.toml", '[engine]\nlease = "x"\nconcurrency = -1\n')
    assert "(and 1 more)" in error_of(path)


# --------------------------------------------------------------------------- secrets


def test_secrets_never_shown(tmp_path: Path) -> None:
    path = write(
        tmp_path / "c.toml",
        f'[database]\nurl = "postgresql://umt:{SECRET}@db/umt"\n'
        f'[qbittorrent]\npassword = "{SECRET}"\n',
    )
    settings = load_settings(path, env={})
    for shown in (
        repr(settings),
        str(settings),
        settings.model_dump_json(),
        str(settings.model_dump()),
        repr(settings.database_target()),
        settings.database_url_for_display(),
    ):
        assert SECRET not in shown
    assert settings.database_url_for_display() == "postgresql://umt:***@db/umt"
    assert settings.database_url() == f"postgresql://umt:{SECRET}@db/umt"
    assert settings.qbittorrent.password is not None
    assert settings.qbittorrent.password.get_secret_value() == SECRET


@pytest.mark.parametrize(
    "env",
    [
        {"UMT_DATABASE_URL": f"mysql://u:{SECRET}@h/db"},
        {"UMT_DATABASE_URL": f"sqlite://u:{SECRET}@h/db"},
    ],
)
def test_errors_about_secret_values_do_not_show_them(env: dict[str, str]) -> None:
    assert SECRET not in error_of(**env)


def test_wrongly_typed_password_is_not_echoed(tmp_path: Path) -> None:
    path = write(tmp_path / "c.toml", "[qbittorrent]\npassword = 12345678\n")
    message = error_of(path)
    assert "qbittorrent.password" in message and "12345678" not in message


# --------------------------------------------------------------------------- warnings


@pytest.mark.skipif(os.name == "nt", reason="POSIX permissions")
@pytest.mark.parametrize(
    ("text", "mode", "warns"),
    [
        (f'[qbittorrent]\npassword = "{SECRET}"\n', 0o644, True),
        (f'[qbittorrent]\npassword = "{SECRET}"\n', 0o640, True),
        (f'[qbittorrent]\npassword = "{SECRET}"\n', 0o600, False),
        (f'[database]\nurl = "postgresql://u:{SECRET}@h/db"\n', 0o644, True),
        ('[database]\nurl = "postgresql://u@h/db"\n', 0o644, False),
        ('[qbittorrent]\ncategory = "tv"\n', 0o644, False),
    ],
)
def test_permission_warnings(tmp_path: Path, text: str, mode: int, warns: bool) -> None:
    path = write(tmp_path / "c.toml", text, mode=mode)
    warnings = permission_warnings(load_settings(path, env={}))
    if warns:
        assert len(warnings) == 1
        assert f"chmod 600 {path}" in warnings[0]
        assert SECRET not in warnings[0]
    else:
        assert warnings == []


def test_password_from_env_only_does_not_warn(tmp_path: Path) -> None:
    path = write(tmp_path / "c.toml", '[qbittorrent]\ncategory = "tv"\n', mode=0o644)
    settings = load_settings(path, env={"UMT_QBITTORRENT_PASSWORD": SECRET})
    assert permission_warnings(settings) == []


def test_env_warnings_flag_unknown_umt_variables() -> None:
    warnings = env_warnings({"UMT_QBITORRENT_URL": "x", "UMT_CONFIG": "c", "HOME": "/h"})
    assert len(warnings) == 1
    assert "UMT_QBITORRENT_URL" in warnings[0] and "UMT_QBITTORRENT_URL" in warnings[0]


# --------------------------------------------------------------------------- database URLs


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite:///umt.db", Path("/work/dir/umt.db")),
        ("sqlite:///data/umt.db", Path("/work/dir/data/umt.db")),
        ("sqlite:////var/lib/umt/umt.db", Path("/var/lib/umt/umt.db")),
    ],
)
def test_sqlite_urls(url: str, expected: Path) -> None:
    target = parse_database_url(url, cwd=Path("/work/dir"))
    assert target.kind == "sqlite"
    assert target.sqlite_path == expected
    assert target.url == f"sqlite:///{expected}"


def test_relative_sqlite_url_is_pinned_at_load_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    settings = load_settings(env={"UMT_DATABASE_URL": "sqlite:///rel.db"})
    assert settings.database_url() == f"sqlite:///{tmp_path / 'rel.db'}"
    assert settings.database_target().sqlite_path == tmp_path / "rel.db"


@pytest.mark.parametrize(
    "url", ["postgresql://umt@localhost/umt", "postgres://u:p@h:5432/db?sslmode=require"]
)
def test_postgresql_urls(url: str) -> None:
    target = parse_database_url(url)
    assert target.kind == "postgresql"
    assert target.url == url
    assert target.sqlite_path is None


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("sqlite://", "in-memory"),
        ("sqlite:///", "in-memory"),
        ("sqlite:///:memory:", "in-memory"),
        ("sqlite://host/umt.db", "host part"),
        ("sqlite:///umt.db?mode=ro", "query"),
        ("mysql://u@h/db", "unsupported"),
        ("postgresql+psycopg://u@h/db", "unsupported"),
        ("umt.db", "unsupported"),
        ("host=localhost dbname=umt", "unsupported"),
    ],
)
def test_bad_database_urls(url: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(fragment)):
        parse_database_url(url)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:pw@h:5432/db", "postgresql://u:***@h:5432/db"),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
        ("postgresql://u:p@ss@h/db", "postgresql://u:***@h/db"),
        ("postgresql://h/db?user=u&password=pw", "postgresql://h/db?user=u&password=***"),
        ("sqlite:////abs/umt.db", "sqlite:////abs/umt.db"),
    ],
)
def test_mask_database_url(url: str, shown: str) -> None:
    assert mask_database_url(url) == shown


def test_section_table_matches_settings_fields() -> None:
    assert [*config._SECTIONS, *config._LIST_SECTIONS] == list(Settings.model_fields)


def test_permission_settings_are_normalised(tmp_path: Path) -> None:
    path = write(tmp_path / "c.toml",
                 '[library]\nfile_mode = "640"\ndir_mode = "0o2775"\ngroup = "users"\n')
    library = load_settings(path, env={}).library
    assert (library.file_mode, library.dir_mode, library.group) == ("0640", "2775", "users")
    assert library.permissions == (0o640, 0o2775, grp.getgrnam("users").gr_gid)
    from_env = load_settings(None, env={"UMT_LIBRARY_GROUP": "4321"}).library
    assert from_env.permissions == (None, None, 4321)
    assert Settings().library.permissions == (None, None, None)


# --------------------------------------------------------------------------- media servers, notify


SERVERS = f'''
[notify]
urls = ["json://127.0.0.1:9/{SECRET}", "ntfys://ntfy.sh/topic"]
attempts = 3
retry_interval = "2s"

[[media_servers]]
kind = "jellyfin"
url = "http://127.0.0.1:8096"
token = "{SECRET}"

[[media_servers]]
kind = "plex"
name = "plex-4k"
url = "https://plex.example:32400/"
token = "{SECRET}"
library_path = "/data/library"
'''


def test_media_servers_and_notify_urls_are_read(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path / "c.toml", SERVERS), env={})
    jellyfin, plex = settings.media_servers
    assert (jellyfin.kind, jellyfin.label, jellyfin.library_path) == ("jellyfin", "jellyfin", None)
    assert (plex.label, plex.library_path) == ("plex-4k", "/data/library")
    assert plex.token.get_secret_value() == SECRET
    assert [url.get_secret_value() for url in settings.notify.urls][1] == "ntfys://ntfy.sh/topic"
    assert (settings.notify.attempts, settings.notify.retry_interval) == (3, timedelta(seconds=2))
    # Secrets stay out of every rendering of the settings.
    assert SECRET not in repr(settings) and SECRET not in str(settings.model_dump())
    assert permission_warnings(load_settings(
        write(tmp_path / "open.toml", SERVERS, mode=0o644), env={}
    ))[0].count("notify.urls and media_servers.token") == 1


def test_notify_urls_from_the_environment_are_split_on_spaces_and_commas() -> None:
    settings = load_settings(env={"UMT_NOTIFY_URLS": "json://a/ , ntfys://ntfy.sh/t  tgram://x/y"})
    assert [u.get_secret_value() for u in settings.notify.urls] == [
        "json://a/", "ntfys://ntfy.sh/t", "tgram://x/y"]


@pytest.mark.parametrize(("text", "message"), [
    ('[[media_servers]]\nkind = "kodi"\nurl = "http://h"\ntoken = "t"\n',
     "media_servers[0].kind"),
    ('[[media_servers]]\nkind = "plex"\nurl = "h:32400"\ntoken = "t"\n', "not an http(s) URL"),
    ('[[media_servers]]\nkind = "plex"\nurl = "http://u:p@h"\ntoken = "t"\n', "in token"),
    ('[[media_servers]]\nkind = "plex"\nurl = "http://h"\n', "media_servers[0].token"),
    ('[[media_servers]]\nkind = "plex"\nurl = "http://h"\ntoken = "t"\nlibrary_path = "x"\n',
     "absolute path"),
    ('[media_servers]\nkind = "plex"\n', "must be an array of tables"),
    ('[[media_servers]]\nkind = "plex"\nurl = "http://h"\ntoken = "t"\nurl2 = 1\n',
     "unknown setting 'media_servers.url2'"),
    ('[notify]\nurls = ["not a url"]\n', "invalid setting notify.urls"),
    ('[notify]\nattempts = 0\n', "notify.attempts"),
    ('[notify]\nretry_interval = "2h"\n', "notify.retry_interval"),
])
def test_bad_media_server_and_notify_settings(tmp_path: Path, text: str, message: str) -> None:
    text = text.replace('token = "t"', f'token = "{SECRET}"')
    with pytest.raises(ConfigError) as error:
        load_settings(write(tmp_path / "c.toml", text), env={})
    assert message in str(error.value) and SECRET not in str(error.value)
