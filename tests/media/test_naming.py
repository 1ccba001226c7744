"""umt.media.naming: templates, sanitising, and hostile names that must stay in the library."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from umt.media.importing import ensure_dir_inside, import_file
from umt.media.naming import (
    FIELDS,
    TemplateError,
    UnsafePath,
    fields_for,
    render_destination,
    sanitize_component,
    validate_template,
)

HASH = "0123456789ABCDEF0123456789abcdef01234567"


def fields(**overrides: str) -> dict[str, str]:
    values = fields_for(
        title="Big Movie",
        name="Big.Movie.2023.2160p",
        source=Path("/downloads/Big.Movie.2023.2160p.mkv"),
        info_hash=HASH,
        year=2023,
        category="movies",
    )
    return {**values, **overrides}


def tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


# --------------------------------------------------------------------------- templates


def test_validate_template_returns_the_fields_in_order() -> None:
    template = "{category}/{title} [{info_hash8}]/{filename}"
    assert validate_template(template) == ("category", "title", "info_hash8", "filename")


@pytest.mark.parametrize(
    ("template", "complaint"),
    [
        ("{titel}/{filename}", "unknown field {titel}"),
        ("{title.upper}/{filename}", "unknown field"),
        ("{}/{filename}", "unknown field"),
        ("{title!r}/{filename}", "no conversion"),
        ("{title:{width}}/{filename}", "nested field"),
        ("{season:xyz}/{filename}", "not a valid format for a number"),
        ("{title:02d}/{filename}", "not a valid format for text"),
        ("/srv/{title}/{filename}", "relative"),
        ("../{title}/{filename}", "'..'"),
        ("{title}/../{filename}", "'..'"),
        ("{title}//{filename}", "empty"),
        ("{title}/", "empty"),
        ("{title", "{title"),
        ("{title}\0/{filename}", "NUL"),
    ],
)
def test_template_mistakes_surface_early(template: str, complaint: str) -> None:
    with pytest.raises(TemplateError) as failure:
        validate_template(template)
    assert complaint in str(failure.value)


def test_an_unknown_field_error_lists_the_known_ones() -> None:
    with pytest.raises(TemplateError) as failure:
        validate_template("{titel}")
    assert all(name in str(failure.value) for name in FIELDS)


def test_render_destination(tmp_path: Path) -> None:
    dest = render_destination(
        "{category}/{title} ({year}) [{info_hash8}]/{stem}.{ext}", fields(), library_root=tmp_path
    )
    assert dest == tmp_path / "movies" / "Big Movie (2023) [01234567]" / "Big.Movie.2023.2160p.mkv"


def test_fields_for_derives_stem_ext_and_short_hash() -> None:
    values = fields_for(title="T", name="N", source=Path("/d/archive"), info_hash=HASH)
    assert values["stem"] == "archive" and values["ext"] == ""
    assert values["info_hash"] == HASH.lower() and values["info_hash8"] == "01234567"
    assert values["year"] == "" and values["category"] == ""


def test_missing_fields_leave_no_empty_brackets_or_folders(tmp_path: Path) -> None:
    values = fields(year="", category="")
    dest = render_destination(
        "{category}/{title} ({year}) [{year}]/{filename}", values, library_root=tmp_path
    )
    assert dest == tmp_path / "Big Movie" / "Big.Movie.2023.2160p.mkv"


def test_a_template_that_renders_to_nothing_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TemplateError, match="empty path"):
        render_destination("{year}", fields(year=""), library_root=tmp_path)


# --------------------------------------------------------------------------- sanitising


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("..", "_"),
        ("...", "_"),
        ("../../etc/passwd", "-..-etc-passwd"),
        ("/etc/passwd", "-etc-passwd"),
        ("AC/DC \\ Live", "AC-DC - Live"),
        (".hidden", "hidden"),
        ("  spaced  ", "spaced"),
        ("nul\0and\x07bell\x1b[31m", "nulandbell[31m"),
        ("line\nbreak\ttab", "linebreaktab"),
        ("bidi\u202egnp.exe", "bidignp.exe"),
        ("bad\udcffbyte", "bad\ufffdbyte"),
        ("Amélie 日本語", "Amélie 日本語"),
        ("", ""),
    ],
)
def test_sanitize_component(value: str, expected: str) -> None:
    assert sanitize_component(value) == expected


def test_long_values_are_trimmed_on_a_character_boundary_keeping_the_extension() -> None:
    value = "日" * 100 + ".mkv"  # 304 bytes
    trimmed = sanitize_component(value)
    assert len(trimmed.encode()) <= 200 and trimmed.endswith(".mkv")
    assert trimmed[:-4] == "日" * 65


def test_hostile_values_stay_single_components_inside_the_library(tmp_path: Path) -> None:
    library = tmp_path / "library"
    library.mkdir()
    hostile = fields(
        title="../../../etc", category="/abs/path", filename="../../x.mkv", name="..\\..\\y"
    )
    dest = render_destination("{category}/{title}/{name}/{filename}", hostile, library_root=library)
    assert dest.relative_to(library).parts == ("-abs-path", "-..-..-etc", "-..-y", "-..-x.mkv")


def test_a_symlink_inside_the_library_that_leads_out_is_refused(tmp_path: Path) -> None:
    library, outside = tmp_path / "library", tmp_path / "outside"
    library.mkdir()
    outside.mkdir()
    (library / "Movies").symlink_to(outside)

    with pytest.raises(UnsafePath, match="outside"):
        render_destination("Movies/{filename}", fields(), library_root=library)


def test_hostile_names_create_nothing_outside_the_library(tmp_path: Path) -> None:
    library, downloads = tmp_path / "place" / "library", tmp_path / "downloads"
    library.mkdir(parents=True)
    downloads.mkdir()
    source = downloads / "payload.mkv"
    source.write_bytes(b"video")
    before = tree(library.parent)

    hostile = ("..", "../..", "/tmp/evil", "../../../../../../tmp/evil", ".", "a/../../b")
    for attempt, title in enumerate(hostile):
        values = fields_for(
            title=title, name=title, source=source, info_hash=HASH, category=str(attempt)
        )
        values["filename"] = title  # a hostile file name inside the torrent
        template = "{category}/{title}/{name}/{filename}"
        dest = render_destination(template, values, library_root=library)
        ensure_dir_inside(dest.parent, library)
        import_file(source, dest, mode="copy", check=lambda: None, progress=lambda d, t: None)
        assert dest.resolve().is_relative_to(library.resolve())

    after = tree(library.parent)
    assert [p for p in after if p not in before and not p.startswith("library/")] == []
    assert not Path("/tmp/evil").exists()
    assert os.listdir(downloads) == ["payload.mkv"]
