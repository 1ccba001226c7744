"""library.file_mode / dir_mode / group: set on what an import creates, before the publish."""

from __future__ import annotations

import grp
import os
import stat
from pathlib import Path

import pytest

from tests.support.skips import skip_unavailable
from umt.media.importing import (
    ImportResult,
    Permissions,
    ensure_dir_inside,
    import_file,
    unreadable_by_group,
)

#: A group umt is not in (as root: any group); the files' default group is another one.
GID = grp.getgrnam("users").gr_gid
PERMISSIONS = Permissions(file_mode=0o640, dir_mode=0o2750, gid=GID)


@pytest.fixture(autouse=True)
def as_root() -> None:
    if os.geteuid() != 0:
        skip_unavailable("library.group", "giving files a group needs root here")


def mode_and_group(path: Path) -> tuple[int, int]:
    info = path.stat()
    return stat.S_IMODE(info.st_mode), info.st_gid


def test_created_folders_get_the_mode_and_group_existing_ones_are_left_alone(
    tmp_path: Path,
) -> None:
    library = tmp_path / "library"
    (library / "Existing").mkdir(parents=True)
    (library / "Existing").chmod(0o700)
    created = ensure_dir_inside(library / "Existing" / "Show" / "Season 01", library, PERMISSIONS)
    assert created == [library / "Existing" / "Show", library / "Existing" / "Show" / "Season 01"]
    assert all(mode_and_group(folder) == (0o2750, GID) for folder in created)
    assert stat.S_IMODE((library / "Existing").stat().st_mode) == 0o700


@pytest.mark.parametrize("mode", ["copy", "auto"])
def test_a_written_file_has_its_mode_and_group_before_it_is_published(
    tmp_path: Path, mode: str,
) -> None:
    source = tmp_path / "downloads" / "a.mkv"
    source.parent.mkdir()
    source.write_bytes(b"video" * 1000)
    source.chmod(0o600)
    library = tmp_path / "library"
    library.mkdir()
    dest = library / "a.mkv"
    seen_before_publish: list[tuple[int, int]] = []

    def before_rename(result: ImportResult) -> None:
        [partial] = [p for p in library.iterdir() if p.name.endswith(".umt-partial")]
        seen_before_publish.append(mode_and_group(partial))

    result = import_file(source, dest, mode="copy" if mode == "copy" else "auto",
                         check=lambda: None, progress=lambda d, t: None,
                         before_rename=before_rename, permissions=PERMISSIONS)
    if result.method == "hardlink":  # auto on one filesystem: the download's own inode
        assert mode_and_group(dest) == mode_and_group(source)
        assert stat.S_IMODE(source.stat().st_mode) == 0o600, "the download was changed"
    else:
        assert seen_before_publish == [(0o640, GID)]
        assert mode_and_group(dest) == (0o640, GID)


def test_unreadable_by_group_names_the_downloads_the_group_cannot_read(tmp_path: Path) -> None:
    downloads = tmp_path / "downloads"
    (downloads / "Pack").mkdir(parents=True)
    readable = downloads / "Pack" / "ok.mkv"
    private = downloads / "Pack" / "private.mkv"
    others = downloads / "others.mkv"
    for path, file_mode in ((readable, 0o640), (private, 0o600), (others, 0o604)):
        path.write_bytes(b"x")
        path.chmod(file_mode)
    for path in (readable, private):
        os.chown(path, -1, GID)
    # others.mkv keeps its group (not GID): the group reads it as "others" do
    (downloads / ".hidden").write_bytes(b"x")
    assert unreadable_by_group(downloads, GID) == (3, [private])
