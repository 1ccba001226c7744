"""Which files an import takes (umt.media.selection, umt.media.packs) on real folder trees
(sizes come from sparse files), with a template that names no episode."""

from __future__ import annotations

from pathlib import Path

import pytest

from umt.media.packs import choose_files
from umt.media.selection import NoMediaFile


def select_media_files(content: Path, *, all_files: bool) -> list[Path]:
    """The files imported through the template (subtitles travel with their video)."""
    chosen = choose_files(content, content.name, template="{title}/{path}", all_files=all_files)
    return [choice.file.path for choice in chosen if choice.subtitle_of is None]


def make(root: Path, files: dict[str, int]) -> None:
    for name, size in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as file:
            file.truncate(size)


def names(paths: list[Path], root: Path) -> list[str]:
    return [path.relative_to(root).as_posix() for path in paths]


@pytest.fixture
def content(tmp_path: Path) -> Path:
    folder = tmp_path / "Big.Movie.2023"
    folder.mkdir()
    return folder


def test_the_largest_video_is_chosen(content: Path) -> None:
    make(
        content,
        {
            "Big.Movie.2023.mkv": 5000,
            "Big.Movie.2023.sample.mkv": 400,
            "Sample/big-movie.mp4": 300,
            "extras/Featurette.MP4": 2000,
            "disc.iso.nfo": 9000,
            "subs/en.srt": 50,
        },
    )
    assert names(select_media_files(content, all_files=False), content) == ["Big.Movie.2023.mkv"]


def test_hidden_partial_and_unwanted_files_are_never_chosen(content: Path) -> None:
    make(
        content,
        {
            "movie.mkv": 1000,
            ".hidden.mkv": 9000,
            "bigger.mkv.!qB": 9000,
            ".0123abcd.parts": 9000,
            "other.mkv.part": 9000,
            ".unwanted/unselected.mkv": 9000,
        },
    )
    assert names(select_media_files(content, all_files=False), content) == ["movie.mkv"]
    assert names(select_media_files(content, all_files=True), content) == ["movie.mkv"]


def test_all_files_lists_every_regular_file_but_samples_sorted(content: Path) -> None:
    make(
        content,
        {
            "S01/E02.mkv": 3000,
            "S01/E01.mkv": 3000,
            "S01/Sample/E01-sample.mkv": 100,
            "S01/Free Samples.mkv": 2000,  # a title, not a sample
            "info.nfo": 10,
            "empty.txt": 0,
        },
    )
    selected = select_media_files(content, all_files=True)
    assert names(selected, content) == [
        "S01/E01.mkv",
        "S01/E02.mkv",
        "S01/Free Samples.mkv",
        "empty.txt",
        "info.nfo",
    ]


def test_a_lone_video_called_sample_is_kept(content: Path) -> None:
    make(content, {"The Sample (2019).mkv": 5000, "readme.txt": 90000})
    assert names(select_media_files(content, all_files=False), content) == ["The Sample (2019).mkv"]


def test_equal_sizes_pick_the_first_name(content: Path) -> None:
    make(content, {"b.mkv": 100, "a.mkv": 100})
    assert names(select_media_files(content, all_files=False), content) == ["a.mkv"]


def test_symlinks_leading_out_of_the_download_are_ignored(content: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    make(outside, {"secret.mkv": 99999, "dir/huge.mkv": 99999})
    make(content, {"movie.mkv": 1000})
    (content / "linked.mkv").symlink_to(outside / "secret.mkv")
    (content / "linked-dir").symlink_to(outside / "dir")

    for all_files in (False, True):
        selected = select_media_files(content, all_files=all_files)
        assert names(selected, content) == ["movie.mkv"]
        assert all(p.resolve().is_relative_to(content.resolve()) for p in selected)


def test_a_single_file_torrent(tmp_path: Path) -> None:
    make(tmp_path, {"Movie.mkv": 1000, "notes.txt": 10, "Movie2.mkv.!qB": 1000})
    assert select_media_files(tmp_path / "Movie.mkv", all_files=False) == [tmp_path / "Movie.mkv"]
    assert select_media_files(tmp_path / "notes.txt", all_files=True) == [tmp_path / "notes.txt"]
    with pytest.raises(NoMediaFile, match="no video file"):
        select_media_files(tmp_path / "notes.txt", all_files=False)
    with pytest.raises(NoMediaFile, match="incomplete"):
        select_media_files(tmp_path / "Movie2.mkv.!qB", all_files=False)


def test_no_media_file_is_a_clear_error(content: Path) -> None:
    make(content, {"readme.txt": 10, "empty.mkv": 0, "movie.mkv.!qB": 1000})
    with pytest.raises(NoMediaFile, match=r"no video file in .*Big\.Movie\.2023"):
        select_media_files(content, all_files=False)


def test_an_empty_or_missing_download_is_a_clear_error(content: Path, tmp_path: Path) -> None:
    with pytest.raises(NoMediaFile, match="no file to import"):
        select_media_files(content, all_files=True)
    with pytest.raises(NoMediaFile, match="does not exist"):
        select_media_files(tmp_path / "gone", all_files=False)
