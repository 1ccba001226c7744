from datetime import timedelta

import pytest

from umt.engine.durations import InvalidDuration, format_duration, parse_duration

VALID = [
    ("0", timedelta(0)),
    ("0s", timedelta(0)),
    ("3s", timedelta(seconds=3)),
    ("15m", timedelta(minutes=15)),
    ("2h", timedelta(hours=2)),
    ("7d", timedelta(days=7)),
    ("1w", timedelta(weeks=1)),
    ("1h30m", timedelta(hours=1, minutes=30)),
    ("1h 30m", timedelta(hours=1, minutes=30)),
    ("1d2h3m4s", timedelta(days=1, hours=2, minutes=3, seconds=4)),
    ("2.5s", timedelta(seconds=2.5)),
    ("0.2s", timedelta(milliseconds=200)),
    ("90", timedelta(seconds=90)),
    ("0.5", timedelta(milliseconds=500)),
    ("  30s  ", timedelta(seconds=30)),
    ("5 minutes", timedelta(minutes=5)),
    ("1:30", timedelta(seconds=90)),
    ("PT15M", timedelta(minutes=15)),
    ("P7D", timedelta(days=7)),
    ("P1DT2H", timedelta(days=1, hours=2)),
    ("PT1.5S", timedelta(seconds=1.5)),
    ("P2W", timedelta(weeks=2)),
    ("PT0S", timedelta(0)),
    ("pt15m", timedelta(minutes=15)),
]

INVALID = [
    ("", "empty"),
    ("   ", "empty"),
    ("-5s", "negative"),
    ("-PT1S", "negative"),
    ("-5", "negative"),
    ("3x", "units"),
    ("10ms", "units"),
    ("1y", "units"),
    ("nan", "units"),
    ("inf", "units"),
    ("1e3", "units"),
    ("1,5s", "units"),
    ("P1Y", "fixed length"),
    ("P1M", "fixed length"),
    ("P1Y2M3D", "fixed length"),
    ("P1.5Y", "fixed length"),
    ("P", "ISO 8601"),
    ("PT", "'T' must be followed"),
    ("P1DT", "'T' must be followed"),
    ("P1D2H", "ISO 8601"),
    ("PT99999999999999999999S", "ISO 8601"),
    ("99999999999999999999d", "longer than 36500 days"),
    ("99999999999999999999", "longer than 36500 days"),
    ("36501d", "longer than 36500 days"),
    ("P36501D", "longer than 36500 days"),
]


@pytest.mark.parametrize(("text", "expected"), VALID)
def test_parse_valid(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(("text", "fragment"), INVALID)
def test_parse_invalid(text: str, fragment: str) -> None:
    with pytest.raises(InvalidDuration) as caught:
        parse_duration(text)
    message = str(caught.value)
    assert fragment in message
    assert repr(text) in message
    assert "\n" not in message


def test_invalid_duration_is_a_value_error() -> None:
    assert issubclass(InvalidDuration, ValueError)


@pytest.mark.parametrize(
    ("duration", "expected"),
    [
        (timedelta(0), "0s"),
        (timedelta(days=7), "7d"),
        (timedelta(days=14), "14d"),
        (timedelta(hours=1, minutes=30), "1h30m"),
        (timedelta(seconds=2.5), "2.5s"),
        (timedelta(milliseconds=200), "0.2s"),
        (timedelta(seconds=90), "1m30s"),
        (timedelta(days=1, seconds=0.5), "1d0.5s"),
        (timedelta(microseconds=1), "0.000001s"),
        (timedelta(seconds=-30), "-30s"),
    ],
)
def test_format(duration: timedelta, expected: str) -> None:
    assert format_duration(duration) == expected


@pytest.mark.parametrize(
    "duration",
    [
        timedelta(0),
        timedelta(days=7),
        timedelta(days=1, hours=2, minutes=3, seconds=4, microseconds=5),
        timedelta(milliseconds=200),
        timedelta(days=400, seconds=86_399, microseconds=999_999),
        timedelta(days=36_500),
    ],
)
def test_format_round_trips(duration: timedelta) -> None:
    assert parse_duration(format_duration(duration)) == duration


def test_a_duration_longer_than_any_real_one_is_refused_without_echoing_it_whole() -> None:
    with pytest.raises(InvalidDuration, match="too long") as info:
        parse_duration("9" * 100_000)
    assert len(str(info.value)) < 120
