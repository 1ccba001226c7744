"""Which files of a release are imported, and which subtitles travel with which video.

The rule (also in the README, "Season packs, extras and subtitles"):

- Samples never count (see ``umt.media.selection``); hidden and partial files neither.
- A template that uses ``{season}`` or ``{episode}`` (a series template) imports every video
  whose release name has them: one torrent, many episodes, each to its own path. A video
  without them (an extra, a featurette) is left out; when no video has them the import fails
  naming the field and the file. With ``library.all_files`` the other files that have them
  (``Show.S01E02.nfo``) go through the template too; the rest are left out.
- Any other template imports the largest video, or with ``all_files`` every file, as before.
- Subtitles (``.srt .ass .ssa .sub .idx .vtt .sup``) travel with their video: each goes beside
  the video's library file under the same name plus its language, if the name says one
  (``Show - S01E02.en.srt``). A subtitle belongs to the video of the same season and episode
  (series template), to the only video imported (any other template), or to the video whose
  file name it starts with. Of several subtitles for one video in one language the largest is
  kept. A subtitle that belongs to no video is left out, or with ``all_files`` imported through
  the template like any other file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from umt.media.naming import REQUIRED_FIELDS, MissingField, validate_template
from umt.media.release_names import parse_release, release_path, subtitle_language
from umt.media.selection import (
    VIDEO_EXTENSIONS,
    MediaFile,
    NoMediaFile,
    media_files,
    without_samples,
)

__all__ = ["Choice", "choose_files"]


@dataclass(frozen=True)
class Choice:
    """One file to import: through the template, or (``subtitle_of``) beside a video."""

    file: MediaFile
    release: dict[str, Any]
    subtitle_of: Path | None = None
    language: str | None = None


def choose_files(
    content_path: Path, torrent_name: str | None, *, template: str, all_files: bool
) -> list[Choice]:
    """The files of ``content_path`` to import, videos before their subtitles."""
    files = without_samples(media_files(content_path))

    def parse(item: MediaFile) -> dict[str, Any]:
        return parse_release(release_path(torrent_name, item.relative))

    required = REQUIRED_FIELDS.intersection(validate_template(template))
    others = [f for f in files if not f.is_subtitle]
    if required:
        mains = _episodes(others, parse, required, template, all_files=all_files)
    elif all_files:
        mains = others
    else:
        videos = [f for f in others if f.is_video]
        if not videos:
            extensions = " ".join(sorted(VIDEO_EXTENSIONS))
            raise NoMediaFile(f"no video file in {content_path} (looked for {extensions})")
        mains = [min(videos, key=lambda f: (-f.size, f.relative))]
    chosen = [Choice(f, parse(f)) for f in sorted(mains, key=lambda f: f.relative)]
    subtitles = sorted((f for f in files if f.is_subtitle), key=lambda f: (-f.size, f.relative))
    travelling: dict[tuple[Path, str | None, str], Choice] = {}
    for subtitle in subtitles:
        release = parse(subtitle)
        owner = _owner(subtitle, release, chosen, required)
        if owner is None:
            if all_files and required.issubset(release):
                chosen.append(Choice(subtitle, release))
            continue
        language = subtitle_language(release_path(torrent_name, subtitle.relative))
        key = (owner, language, subtitle.path.suffix.lower())
        travelling.setdefault(key, Choice(subtitle, release, owner, language))
    if not chosen:
        raise NoMediaFile(f"no file to import in {content_path}")
    return chosen + sorted(travelling.values(), key=lambda c: c.file.relative)


def _episodes(
    files: list[MediaFile], parse: Callable[[MediaFile], dict[str, Any]],
    required: frozenset[str], template: str, *, all_files: bool,
) -> list[MediaFile]:
    videos = [f for f in files if f.is_video]
    episodes = [f for f in files
                if (f.is_video or all_files) and required.issubset(parse(f))]
    if videos and not any(f.is_video for f in episodes):
        largest = min(videos, key=lambda f: (-f.size, f.relative))
        missing = sorted(required.difference(parse(largest)))[0]
        raise MissingField(missing, largest.relative, template)
    return episodes


def _owner(
    subtitle: MediaFile, release: dict[str, Any], chosen: list[Choice], required: frozenset[str]
) -> Path | None:
    videos = [c for c in chosen if c.file.is_video]
    if required:
        key = (release.get("season"), release.get("episode"))
        matches = [c for c in videos if (c.release.get("season"), c.release.get("episode")) == key]
        return matches[0].file.path if len(matches) == 1 else None
    if len(videos) == 1:
        return videos[0].file.path
    name = subtitle.path.name
    prefixed = [c for c in videos if name.startswith(c.file.path.stem + ".")]
    if not prefixed:
        return None
    return max(prefixed, key=lambda c: len(c.file.path.stem)).file.path
