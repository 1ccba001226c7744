"""Plain checks of setting values shared by the settings models (``umt.config``) and the finish
hook's reading of them (``umt.config_hook``): no pydantic here. Each raises ``ValueError`` with
the message the user sees."""

from __future__ import annotations

import re
from datetime import timedelta
from urllib.parse import urlsplit

from umt.engine import InvalidDuration, parse_duration

#: The documented bounds of every duration setting (README, "Limits").
TEN_YEARS = timedelta(days=3650)
#: 63 bytes (PostgreSQL's identifiers) less the longest suffix umt derives ("_media", ".workers").
MAX_SCHEMA_CHARS = 55


def duration(value: object) -> object:
    """Accept duration text, a bare number of seconds (TOML ints and floats), or a timedelta."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)
    if isinstance(value, str):
        try:
            return parse_duration(value)
        except InvalidDuration as error:
            raise ValueError(str(error)) from None
    if isinstance(value, timedelta):
        if value < timedelta(0):
            raise ValueError("must not be negative")
        return value
    raise ValueError(f"expected a duration such as '30s' or '7d', got {value!r}")


def off(value: object) -> object:
    """``off`` (or 0) switches an optional duration off."""
    if isinstance(value, str) and value.strip().lower() in ("off", "0"):
        return None
    if isinstance(value, int | float) and not isinstance(value, bool) and value == 0:
        return None
    return value


def http_url(value: str, *, example: str, credentials: str) -> str:
    try:
        parts = urlsplit(value)
        usable = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        usable = False
    if not usable:
        raise ValueError(f"not an http(s) URL such as '{example}'")
    if "@" in parts.netloc:
        raise ValueError(f"put credentials in {credentials}, not in the URL")
    return value


def check_schema(value: str) -> str:
    # The name is spliced into SQL (schemas cannot be bound parameters), so keep it plain,
    # and short enough that the names derived from it ("<schema>_media", the notification
    # channel "<schema>.workers") fit PostgreSQL's 63-byte identifiers uncut.
    if not re.fullmatch(r"[a-z_][a-z0-9_]*", value) or value.startswith("pg_"):
        raise ValueError(
            "not a plain PostgreSQL schema name"
            " (lowercase letters, digits, '_'; not starting with a digit or 'pg_')"
        )
    if len(value) > MAX_SCHEMA_CHARS:
        raise ValueError(f"longer than {MAX_SCHEMA_CHARS} characters")
    return value
