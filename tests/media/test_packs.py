"""umt.media.packs and the release fields: season packs, extras, subtitles, missing fields."""

from __future__ import annotations

from pathlib import Path

import pytest

from umt.media.naming import MissingField, fields_for, render_destination
from umt.media.packs import Choice, choose_files
from umt.media.release_names import EpisodeNumbers, parse_release, release_path

SERIES = "{title}/Season {season:02}/{title} - S{season:02}E{episode:02}.{ext}"
PACK = "Show.Name.S01.1080p.WEB-DL-GRP"


def lay_out(root: Path, files: dict[str, int]) -> Path:
    for name, size in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(b"x" * size)
    return root


def relatives(choices: list[Choice], content: Path) -> list[str]:
    return [choice.file.path.relative_to(content).as_posix() for choice in choices]


def test_a_file_is_parsed_with_its_torrent_folder_in_front() -> None:
    assert release_path(PACK, "Show.Name.S01E02.mkv") == f"{PACK}/Show.Name.S01E02.mkv"
    assert release_path("Movie.2023.mkv", "Movie.2023.mkv") == "Movie.2023.mkv"
    parsed = parse_release("Tears.of.Steel.2012.720p.WEB-DL/tos.mkv")
    assert parsed["title"] == "Tears of Steel" and parsed["year"] == 2012


def test_format_specs_and_double_episodes(tmp_path: Path) -> None:
    release = parse_release("Show.Name.S01E01E02.720p.HDTV.x264-GRP.mkv")
    assert release["episode"] == EpisodeNumbers((1, 2))
    values = fields_for(title="Show Name", name="n", source=Path("/d/a.mkv"), info_hash="a" * 40,
                        release=release)
    dest = render_destination(SERIES, values, library_root=tmp_path)
    assert dest == tmp_path / "Show Name" / "Season 01" / "Show Name - S01E01-E02.mkv"


def test_a_missing_season_or_episode_names_the_field_and_the_file(tmp_path: Path) -> None:
    values = fields_for(title="Movie", name="n", source=Path("/d/Movie.2023.mkv"),
                        info_hash="a" * 40, release=parse_release("Movie.2023.mkv"))
    with pytest.raises(MissingField) as failure:
        render_destination(SERIES, values, library_root=tmp_path)
    assert "{season}" in str(failure.value) and "Movie.2023.mkv" in str(failure.value)


def test_a_movie_under_a_series_template_fails_before_anything_is_chosen(tmp_path: Path) -> None:
    content = lay_out(tmp_path / "Movie.2023.1080p", {"Movie.2023.1080p.mkv": 300})
    with pytest.raises(MissingField, match=r"\{episode\}.*Movie\.2023\.1080p\.mkv"):
        choose_files(content, "Movie.2023.1080p", template=SERIES, all_files=False)


def test_a_season_pack_imports_every_episode_with_its_subtitles(tmp_path: Path) -> None:
    content = lay_out(tmp_path / PACK, {
        "Show.Name.S01E01.mkv": 300, "Show.Name.S01E02.mkv": 300,
        "Sample/show.name.s01e01.sample.mkv": 10, "Extras/Behind.The.Scenes.mkv": 200,
        "Subs/Show.Name.S01E01/2_English.srt": 40, "Subs/Show.Name.S01E01/3_English.srt": 30,
        "Subs/Show.Name.S01E02.fr.srt": 20, "Show.Name.S01E02.nfo": 1, "pack.nfo": 1,
    })
    chosen = choose_files(content, PACK, template=SERIES, all_files=False)
    assert relatives(chosen, content) == [
        "Show.Name.S01E01.mkv", "Show.Name.S01E02.mkv",
        "Subs/Show.Name.S01E01/2_English.srt",  # the larger of two English subtitles
        "Subs/Show.Name.S01E02.fr.srt",
    ]
    subtitles = {c.file.path.name: (c.subtitle_of, c.language) for c in chosen if c.subtitle_of}
    assert subtitles == {"2_English.srt": (content / "Show.Name.S01E01.mkv", "en"),
                         "Show.Name.S01E02.fr.srt": (content / "Show.Name.S01E02.mkv", "fr")}

    with_all = choose_files(content, PACK, template=SERIES, all_files=True)
    assert "Show.Name.S01E02.nfo" in relatives(with_all, content)
    assert "pack.nfo" not in relatives(with_all, content)
    assert "Extras/Behind.The.Scenes.mkv" not in relatives(with_all, content)


def test_other_templates_keep_importing_the_largest_video_and_its_subtitles(
    tmp_path: Path,
) -> None:
    content = lay_out(tmp_path / "Movie.2023", {
        "Movie.2023.mkv": 300, "Movie.2023.en.srt": 5, "Movie.2023.nfo": 1, "Extra.mkv": 100,
    })
    chosen = choose_files(content, "Movie.2023", template="{title}/{path}", all_files=False)
    assert relatives(chosen, content) == ["Movie.2023.mkv", "Movie.2023.en.srt"]
    everything = choose_files(content, "Movie.2023", template="{title}/{path}", all_files=True)
    assert relatives(everything, content) == [
        "Extra.mkv", "Movie.2023.mkv", "Movie.2023.nfo", "Movie.2023.en.srt",
    ]
    assert everything[-1].subtitle_of == content / "Movie.2023.mkv"
