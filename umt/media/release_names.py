"""What a release name says: title, year, season, episode… as parsed by ``guessit``.

A file is parsed with the torrent's folder in front of it (``Show.S01.1080p/Show.S01E02.mkv``):
guessit reads the file's name first and takes from the folder what the file's name lacks (a
title or a year only the folder carries, say). A single-file torrent is just its file's name.

``guessit`` is imported on first use only: ``umt --help`` must not pay for it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from pathlib import PurePosixPath
from typing import Any

__all__ = ["RELEASE_FIELDS", "EpisodeNumbers", "parse_release", "release_path", "subtitle_language"]

#: The template fields guessit fills; ``ext`` is the file's own extension (see ``naming``).
RELEASE_FIELDS = ("title", "year", "season", "episode", "episode_title", "screen_size", "source",
                  "video_codec", "edition")
#: Languages that name no language a media server could show.
_NO_LANGUAGE = frozenset({"und", "mul", "zxx"})


class EpisodeNumbers(tuple[int, ...]):
    """The episodes of one file; a double episode formats as ``01-E02`` (``S01E01-E02``), the
    multi-episode spelling Jellyfin and Plex both read."""

    def __format__(self, spec: str) -> str:
        return "-E".join(format(number, spec) for number in self)

    def __str__(self) -> str:
        return format(self, "")


def release_path(torrent_name: str | None, inside: PurePosixPath | str) -> str:
    """The text guessit parses for one file: ``torrent name/path inside``, or the file's name
    alone for a single-file torrent (whose name is the file's)."""
    inside_text = PurePosixPath(inside).as_posix()
    if not torrent_name or torrent_name == inside_text:
        return inside_text
    return f"{torrent_name}/{inside_text}"


def parse_release(text: str) -> dict[str, Any]:
    """The release fields found in ``text`` (absent ones are left out): ``season`` and ``year``
    are ints, ``episode`` an :class:`EpisodeNumbers`, the others strings."""
    return dict(_parse_cached(text))


@functools.lru_cache(maxsize=1024)
def _parse_cached(text: str) -> tuple[tuple[str, Any], ...]:
    guess = _guess(text)
    found: dict[str, Any] = {}
    for key in RELEASE_FIELDS:
        value = guess.get(key)
        if value is None or value == "" or value == []:
            continue
        if key == "episode":
            found[key] = EpisodeNumbers(sorted(set(_as_list(value))))
        elif key in ("season", "year"):
            found[key] = int(_as_list(value)[0])
        else:
            found[key] = " ".join(str(part) for part in _as_list(value))
    return tuple(found.items())


def subtitle_language(text: str) -> str | None:
    """The language a subtitle's name declares (``en``, ``pt-BR``), if any."""
    language = _guess(text).get("subtitle_language")
    if isinstance(language, list):
        language = language[0] if len(language) == 1 else None
    code = str(language) if language is not None else ""
    return code if code and code not in _NO_LANGUAGE else None


def _guess(text: str) -> Mapping[str, Any]:
    from guessit import guessit  # heavy: loaded on first use only

    return guessit(text)


def _as_list(value: object) -> list[Any]:
    if isinstance(value, list | tuple):
        return list(value)
    if isinstance(value, Iterable) and not isinstance(value, str):
        return list(value)
    return [value]
