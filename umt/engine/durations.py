"""Parse and format the durations users type: ``3s``, ``1h30m``, ``90``, ``PT15M``, ``P7D``."""

from __future__ import annotations

import datetime
import math
import re

__all__ = ["MAX_DURATION", "InvalidDuration", "format_duration", "parse_duration"]

_PLAIN_SECONDS = re.compile(r"\d+(?:\.\d*)?|\.\d+")
_ISO_PREFIX = re.compile(r"[+-]?P", re.IGNORECASE)
# Years and months have no fixed length, so an ISO date part holding Y or M is refused.
_ISO_CALENDAR_UNITS = re.compile(r"[+-]?P[^T]*[YM]", re.IGNORECASE)
#: The longest duration accepted anywhere: "now" plus this must still be a time a database and
#: ``datetime`` can hold (a timedelta can reach 2.7 million years; a timestamp only year 9999).
MAX_DURATION = datetime.timedelta(days=36_500)
_MAX_SECONDS = MAX_DURATION.total_seconds()

#: Durations are typed by people: anything longer is not one (and is not echoed whole).
_MAX_TEXT = 64

_UNITS = (("d", 86_400), ("h", 3_600), ("m", 60))


class InvalidDuration(ValueError):
    """A duration string that cannot be used (unparseable, negative, or not a fixed length)."""

    exit_code = 2  # bad input, as the command line reports it


def parse_duration(text: str) -> datetime.timedelta:
    """Return the non-negative duration described by ``text``.

    Accepted: ``0``, plain seconds (``90``, ``0.5``), units ``s m h d w`` alone or combined
    (``1h30m``, ``1d 2h``, ``2.5s``), clock forms (``1:30``), and ISO 8601 durations without
    years or months (``PT15M``, ``P7D``, ``P1DT2H``, ``P2W``).
    """
    if not isinstance(text, str):
        raise InvalidDuration(f"invalid duration {text!r}: expected text such as '15m' or 'PT15M'")
    stripped = text.strip()
    if len(stripped) > _MAX_TEXT:
        raise InvalidDuration(f"invalid duration {text[:_MAX_TEXT]!r}…: too long")
    if not stripped:
        raise InvalidDuration(f"invalid duration {text!r}: empty (examples: '30s', '7d', 'PT15M')")
    if stripped.startswith("-"):
        raise InvalidDuration(f"invalid duration {text!r}: must not be negative")
    if _ISO_PREFIX.match(stripped):
        return _check_range(text, _parse_iso(text, stripped.upper()))
    return _to_timedelta(text, _human_seconds(text, stripped))


def _parse_iso(original: str, text: str) -> datetime.timedelta:
    if _ISO_CALENDAR_UNITS.match(text):
        raise InvalidDuration(
            f"invalid duration {original!r}: years and months have no fixed length;"
            " use days or weeks instead (e.g. 'P30D')"
        )
    if text.endswith("T"):
        raise InvalidDuration(
            f"invalid duration {original!r}: ISO 8601 'T' must be followed by a time"
        )
    import isodate  # here, not at import: most commands parse no duration

    try:
        parsed = isodate.parse_duration(text)
    except (isodate.ISO8601Error, ValueError, OverflowError):
        raise InvalidDuration(
            f"invalid duration {original!r}: not a valid ISO 8601 duration (e.g. 'PT15M', 'P7D')"
        ) from None
    if not isinstance(parsed, datetime.timedelta):
        raise InvalidDuration(f"invalid duration {original!r}: years and months are not supported")
    return parsed


def _human_seconds(original: str, text: str) -> float:
    if _PLAIN_SECONDS.fullmatch(text):
        return float(text)
    from pytimeparse.timeparse import timeparse  # here, not at import: its patterns are large

    seconds: int | float | None = timeparse(text)
    if seconds is None:
        raise InvalidDuration(
            f"invalid duration {original!r}: use a number of seconds or units s, m, h, d, w"
            " (e.g. '30s', '1h30m', '7d') or ISO 8601 (e.g. 'PT15M')"
        )
    return float(seconds)


def _to_timedelta(original: str, seconds: float) -> datetime.timedelta:
    if math.isnan(seconds) or math.isinf(seconds):
        raise InvalidDuration(f"invalid duration {original!r}: not a finite number")
    if seconds > _MAX_SECONDS:
        raise InvalidDuration(f"invalid duration {original!r}: longer than {_LIMIT_TEXT}")
    return _check_range(original, datetime.timedelta(seconds=seconds))


def _check_range(original: str, duration: datetime.timedelta) -> datetime.timedelta:
    if duration < datetime.timedelta(0):
        raise InvalidDuration(f"invalid duration {original!r}: must not be negative")
    if duration > MAX_DURATION:
        raise InvalidDuration(f"invalid duration {original!r}: longer than {_LIMIT_TEXT}")
    return duration


_LIMIT_TEXT = f"{MAX_DURATION.days} days"


def format_duration(duration: datetime.timedelta) -> str:
    """Return a compact form that :func:`parse_duration` reads back: ``7d``, ``1h30m``, ``2.5s``."""
    if duration < datetime.timedelta(0):
        return "-" + format_duration(-duration)
    whole_seconds = duration.days * 86_400 + duration.seconds
    parts: list[str] = []
    for suffix, size in _UNITS:
        count, whole_seconds = divmod(whole_seconds, size)
        if count:
            parts.append(f"{count}{suffix}")
    if whole_seconds or duration.microseconds or not parts:
        parts.append(_format_seconds(whole_seconds, duration.microseconds))
    return "".join(parts)


def _format_seconds(seconds: int, microseconds: int) -> str:
    if not microseconds:
        return f"{seconds}s"
    return f"{seconds}.{microseconds:06d}".rstrip("0") + "s"
