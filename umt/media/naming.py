"""Library paths from a naming template (``library.naming_template``).

A template is a relative path whose ``{field}`` placeholders are replaced by sanitised values,
for example ``"{title}/{path}"`` or
``"{title} ({year})/Season {season:02}/{title} - S{season:02}E{episode:02}.{ext}"``.
``/`` separates folders; ``{{`` and ``}}`` stand for literal braces. A placeholder may carry a
Python format spec (``{season:02}``, ``{title:.40}``); ``!r``-style conversions are refused.

Fields of the acquisition and the file:

==================  =======================================================================
``title``           the title: the one given with ``--name``, else the release's title as
                    guessit reads it (``Big Movie``), else the torrent's name
``name``            the torrent name
``path``            the file's path inside the torrent's folder, folders included
                    (``DISC1/VTS_01_1.VOB``; for a single-file torrent, its file name)
``filename``        the source file name, extension included (``Movie.2023.2160p.mkv``)
``stem``            the source file name without its extension (``Movie.2023.2160p``)
``ext``             the extension without the dot (``mkv``)
``info_hash``       the torrent's info-hash, 40 lowercase hex digits
``info_hash8``      its first 8 digits
``category``        the qBittorrent category
==================  =======================================================================

Fields from the release name, parsed by guessit (``umt.media.release_names``): ``year``,
``season``, ``episode`` (numbers: ``{episode:02}``; a double episode renders ``01-E02``),
``episode_title``, ``screen_size`` (``2160p``), ``source`` (``Blu-ray``, ``Web``),
``video_codec`` (``H.265``) and ``edition`` (``Director's Cut``).

A missing field: ``season`` and ``episode`` have no sensible empty value, so a template that
uses one refuses a file without it with :class:`MissingField`, naming the field and the file,
before anything is copied (a permanent failure of the run). Every other field without a value
renders as nothing: an empty ``()`` or ``[]`` left behind and an empty folder level are
dropped, and so is a `` - `` left dangling before the extension or at the end, so
``"{title} ({year})/{filename}"`` gives ``"Title/…"`` without a year and
``"{title} - {edition}.{ext}"`` gives ``"Title.mkv"`` without an edition.
:func:`fields_for` builds the mapping from the acquisition's facts.

The default template is ``{title}/{path}``: every file of a multi-file import keeps its place
in the torrent's layout, so two files with one name in two folders never meet.

Every value is sanitised into a single path component (``path``: each of its components):
``/`` and ``\\`` become ``-``; NUL, control and bidirectional-override characters are removed;
undecodable bytes become U+FFFD;
leading dots (hidden files, ``..``) and surrounding spaces are removed; the result is trimmed to
200 bytes of UTF-8, keeping a file extension. A value that sanitises to nothing becomes ``_``.
The rendered path must then resolve, symlinks included, inside the library root, or
:class:`UnsafePath` is raised. Template mistakes raise :class:`TemplateError`; call
:func:`validate_template` when the configuration is loaded so they surface early.
"""

from __future__ import annotations

import os
import re
import string
import unicodedata
from collections.abc import Callable, Mapping
from pathlib import Path

from umt.media.importing import UnsafePath, resolve_inside
from umt.media.release_names import EpisodeNumbers

__all__ = [
    "DEFAULT_TEMPLATE",
    "FIELDS",
    "MissingField",
    "TemplateError",
    "UnsafePath",
    "companion_destination",
    "fields_for",
    "render_destination",
    "sanitize_component",
    "validate_template",
]

FIELDS = frozenset(
    {"title", "name", "path", "filename", "stem", "ext", "info_hash", "info_hash8", "year",
     "category", "season", "episode", "episode_title", "screen_size", "source", "video_codec",
     "edition"}
)
#: Fields a template that uses them cannot do without.
REQUIRED_FIELDS = frozenset({"season", "episode"})
#: Fields formatted as numbers (``{season:02}``).
NUMBER_FIELDS = frozenset({"season", "episode", "year"})
DEFAULT_TEMPLATE = "{title}/{path}"
FIELD_MAX_BYTES = 200
COMPONENT_MAX_BYTES = 255

_SEPARATORS = str.maketrans({"/": "-", "\\": "-"})
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_EMPTY_BRACKETS = re.compile(r"\s*(?:\(\s*\)|\[\s*\])")
_SPACES = re.compile(r"\s{2,}")
#: A " - " a missing field leaves before the extension or at the end (``Show - s01e02 - .mkv``).
_DANGLING_DASH = re.compile(r"\s+-\s*(?=\.[^.\s]{1,16}$|$)")
_MAX_EXTENSION_CHARS = 16
_PROBE_VALUE = "x"


class TemplateError(ValueError):
    """A naming template that cannot work: unknown field, absolute path, ``..`` and the like."""


class MissingField(TemplateError):
    """A file lacks a field its template requires (``season``, ``episode``)."""

    def __init__(self, field: str, file: str, template: str) -> None:
        super().__init__(
            f"naming template {template!r} uses {{{field}}}, but the release name of {file!r} "
            f"has no {field}"
        )
        self.field = field
        self.file = file


def validate_template(template: str) -> tuple[str, ...]:
    """Check ``template``; return the fields it uses, in order. Raises :class:`TemplateError`."""
    if "\0" in template:
        raise TemplateError("naming template contains a NUL character")
    used = _template_fields(template)
    probe = _fill(template, _probe)
    if probe.startswith("/"):
        raise TemplateError(f"naming template {template!r} must be relative to the library")
    for part in probe.split("/"):
        if part in ("", ".", ".."):
            raise TemplateError(
                f"naming template {template!r} has an empty, '.' or '..' folder level"
            )
    return used


def render_destination(
    template: str, fields: Mapping[str, object], *, library_root: Path
) -> Path:
    """The library path for ``fields``: ``library_root`` joined with the rendered template.

    Raises :class:`TemplateError` for a bad template and :class:`UnsafePath` when the result
    would resolve outside ``library_root`` (through a symlink inside the library, say).
    """
    validate_template(template)
    path = str(fields.get("path") or "")

    def value(field: str, spec: str) -> str:
        if field == "path":
            return "/".join(sanitize_component(part) for part in path.split("/") if part)
        raw = _typed(field, fields.get(field))
        if raw is None:
            if field in REQUIRED_FIELDS:
                raise MissingField(field, path or str(fields.get("filename") or ""), template)
            return ""
        return sanitize_component(format(raw, spec))

    components = [_tidy_component(part) for part in _fill(template, value).split("/")]
    relative = [part for part in components if part]
    if not relative:
        raise TemplateError(f"naming template {template!r} rendered to an empty path")
    if any(part in (".", "..") for part in relative):
        raise UnsafePath(f"naming template {template!r} rendered a '.' or '..' folder level")
    root = Path(os.path.abspath(library_root))
    dest = root.joinpath(*relative)
    resolve_inside(dest, root)
    return dest


def fields_for(
    *,
    title: str,
    name: str,
    source: Path,
    info_hash: str,
    year: int | str | None = None,
    category: str | None = None,
    inside: Path | None = None,
    release: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """The template fields of one source file of an acquisition; ``inside`` is its path
    relative to the torrent's folder (default: its file name); ``release`` what guessit read
    in its release name (see ``umt.media.release_names``), which fills the fields it names
    except ``title`` and, when given, ``year``."""
    stem, dot, ext = source.name.rpartition(".")
    if not dot or not stem:
        stem, ext = source.name, ""
    digest = info_hash.lower()
    parsed = dict(release or {})
    parsed.pop("title", None)
    if year is not None:
        parsed.pop("year", None)
    return {
        "title": title,
        "name": name,
        "path": (inside or Path(source.name)).as_posix(),
        "filename": source.name,
        "stem": stem,
        "ext": ext,
        "info_hash": digest,
        "info_hash8": digest[:8],
        "year": "" if year is None else str(year),
        "category": category or "",
        **parsed,
    }


def companion_destination(video: Path, language: str | None, suffix: str) -> Path:
    """Where a subtitle of the video imported as ``video`` goes: beside it, under its name
    plus the language (``Show - S01E02.en.srt``)."""
    tag = f".{sanitize_component(language)}" if language else ""
    name = sanitize_component(f"{video.stem}{tag}{suffix.lower()}", max_bytes=COMPONENT_MAX_BYTES)
    return video.with_name(name)


def year_in(text: str) -> str | None:
    """A release year in a title or torrent name (``Movie.2023.2160p`` → ``2023``)."""
    match = _YEAR.search(text)
    return match.group(1) if match else None


_YEAR = re.compile(r"(?<!\d)((?:19|20)\d\d)(?!\d)")


def sanitize_component(value: str, *, max_bytes: int = FIELD_MAX_BYTES) -> str:
    """``value`` made safe as one path component (see the module documentation)."""
    if not value:
        return ""
    text = value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    text = "".join(ch for ch in text if not _is_control(ch)).translate(_SEPARATORS)
    text = text.strip().lstrip(". ").strip()
    text = _trim_utf8(text, max_bytes)
    return text or "_"


def _template_fields(template: str) -> tuple[str, ...]:
    used: list[str] = []
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise TemplateError(f"naming template {template!r}: {exc}") from exc
    for _literal, field, spec, conversion in parsed:
        if field is None:
            continue
        if field not in FIELDS:
            known = ", ".join(sorted(FIELDS))
            raise TemplateError(
                f"naming template {template!r} uses unknown field {{{field}}}; known: {known}"
            )
        if conversion or (spec and ("{" in spec or "}" in spec)):
            raise TemplateError(
                f"naming template {template!r}: {{{field}}} takes no conversion or nested field"
            )
        if spec:
            try:
                format(_probe_value(field), spec)
            except ValueError as exc:
                raise TemplateError(
                    f"naming template {template!r}: {{{field}:{spec}}} is not a valid format "
                    f"for {'a number' if field in NUMBER_FIELDS else 'text'}: {exc}"
                ) from None
        used.append(field)
    return tuple(used)


def _fill(template: str, value: Callable[[str, str], str]) -> str:
    pieces: list[str] = []
    for literal, field, spec, _conversion in string.Formatter().parse(template):
        pieces.append(literal)
        if field is not None:
            pieces.append(value(field, spec or ""))
    return "".join(pieces)


def _probe_value(field: str) -> object:
    if field == "episode":
        return EpisodeNumbers((1,))
    return 1 if field in NUMBER_FIELDS else _PROBE_VALUE


def _probe(field: str, spec: str) -> str:
    return format(_probe_value(field), spec)


def _typed(field: str, raw: object) -> object:
    """``raw`` as the template formats it; None when there is no value."""
    if raw is None or raw == "" or raw == ():
        return None
    if field in NUMBER_FIELDS and isinstance(raw, str):
        return int(raw) if raw.isdigit() else raw
    return raw


def _tidy_component(part: str) -> str:
    """Drop what missing fields leave behind; Samba and Windows clients reject trailing dots."""
    part = _SPACES.sub(" ", _EMPTY_BRACKETS.sub("", part)).strip()
    part = _DANGLING_DASH.sub("", part).rstrip(". ")
    return _trim_utf8(part, COMPONENT_MAX_BYTES)


def _is_control(ch: str) -> bool:
    return unicodedata.category(ch) == "Cc" or ch in _BIDI_CONTROLS


def _trim_utf8(text: str, max_bytes: int) -> str:
    """``text`` cut to ``max_bytes`` of UTF-8 on a character boundary, keeping its extension."""
    if len(text.encode()) <= max_bytes:
        return text
    stem, dot, ext = text.rpartition(".")
    keep = dot + ext if dot and stem and 0 < len(ext) <= _MAX_EXTENSION_CHARS else ""
    head = (stem if keep else text).encode()[: max_bytes - len(keep.encode())]
    return head.decode("utf-8", "ignore").rstrip() + keep
