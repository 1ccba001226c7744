"""umt.media.importing on real filesystems: /tmp (ext4 here), /dev/shm, and mounts made as root."""

from __future__ import annotations

import errno
import hashlib
import itertools
import os
import random
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support.skips import skip_unavailable
from umt.media import importing as importer
from umt.media.importing import (
    CrossDevice,
    DestinationExists,
    ImportPermissionError,
    ImportResult,
    LibraryRootMissing,
    NoSpace,
    SourceChanged,
    UnsafePath,
    copying,
    ensure_dir_inside,
    import_file,
    partial_path,
    remove_empty_dirs,
    remove_stray_partial,
    transfer,
)
from umt.media.importing import publish as publishing

MiB = 1024 * 1024


class Canceled(BaseException):
    """Stands for the engine's cancellation: a BaseException that ``except Exception`` misses."""


def no_check() -> None:
    return None


class Progress:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def __call__(self, done: int, total: int) -> None:
        self.calls.append((done, total))


def write_random(path: Path, size: int, seed: int = 1) -> bytes:
    data = random.Random(seed).randbytes(size)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return data


def copy(src: Path, dest: Path, **options: object) -> ImportResult:
    options.setdefault("mode", "copy")
    options.setdefault("check", no_check)
    options.setdefault("progress", Progress())
    return import_file(src, dest, **options)  # type: ignore[arg-type]


def hasher_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "umt-import-sha256"]


@pytest.fixture
def downloads(tmp_path: Path) -> Path:
    folder = tmp_path / "downloads"
    folder.mkdir()
    return folder


@pytest.fixture
def library(tmp_path: Path) -> Path:
    folder = tmp_path / "library"
    folder.mkdir()
    return folder


@pytest.fixture
def other_filesystem(tmp_path: Path) -> Iterator[Path]:
    shm = Path("/dev/shm")
    if not shm.is_dir() or shm.stat().st_dev == tmp_path.stat().st_dev:
        skip_unavailable("import across filesystems",
                         "/dev/shm is not a filesystem other than the temporary folder's")
    folder = Path(tempfile.mkdtemp(prefix="umt-test-", dir=shm))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def mounted_tmpfs(where: Path, options: str) -> Iterator[Path]:
    if os.geteuid() != 0:
        skip_unavailable("full disk and read-only library", "mounting a tmpfs needs root")
    where.mkdir(parents=True, exist_ok=True)
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if mount.returncode != 0:
        skip_unavailable("full disk and read-only library",
                         f"this machine refuses to mount a tmpfs: {mount.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


# --------------------------------------------------------------------------- copy


def test_copy_writes_identical_bytes_with_their_sha256_and_leaves_only_the_file(
    downloads: Path, library: Path
) -> None:
    data = write_random(downloads / "movie.mkv", 64 * MiB)
    progress = Progress()

    result = copy(downloads / "movie.mkv", library / "movie.mkv", progress=progress)

    published = (library / "movie.mkv").stat()
    assert result == ImportResult(
        library / "movie.mkv", len(data), hashlib.sha256(data).hexdigest(), "copy",
        published.st_dev, published.st_ino, published.st_mtime_ns,
    )
    assert (library / "movie.mkv").read_bytes() == data
    assert os.listdir(library) == ["movie.mkv"]
    assert progress.calls[-1] == (len(data), len(data))
    assert not hasher_threads()


def test_copy_with_size_verification_records_no_hash(downloads: Path, library: Path) -> None:
    data = write_random(downloads / "a.mkv", 300_000)

    result = copy(downloads / "a.mkv", library / "a.mkv", verify="size", chunk_size=64 * 1024)

    assert (result.size, result.sha256, result.method) == (len(data), None, "copy")
    assert (library / "a.mkv").read_bytes() == data


def test_copy_of_an_empty_file(downloads: Path, library: Path) -> None:
    (downloads / "empty.nfo").write_bytes(b"")

    result = copy(downloads / "empty.nfo", library / "empty.nfo")

    assert result.sha256 == hashlib.sha256(b"").hexdigest()
    assert (library / "empty.nfo").read_bytes() == b""


def test_progress_is_monotonic_and_ends_with_the_total(
    downloads: Path, library: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(copying, "PROGRESS_INTERVAL_SECONDS", 0.0)
    write_random(downloads / "a.mkv", 1 * MiB)
    progress = Progress()

    copy(downloads / "a.mkv", library / "a.mkv", chunk_size=128 * 1024, progress=progress)

    done = [d for d, _ in progress.calls]
    assert len(done) > 4 and done == sorted(done)
    assert {t for _, t in progress.calls} == {MiB}
    assert progress.calls[-1] == (MiB, MiB)


def test_progress_is_rate_limited(
    downloads: Path, library: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the importer's clock, not the machine's speed: frozen, only the final call; moving
    0.25 s per reading, at most every other chunk (the interval is 0.5 s)."""
    write_random(downloads / "a.mkv", 2 * MiB)
    monkeypatch.setattr(copying, "time", SimpleNamespace(monotonic=lambda: 1000.0))
    frozen = Progress()
    copy(downloads / "a.mkv", library / "a.mkv", chunk_size=64 * 1024, progress=frozen)
    assert frozen.calls == [(2 * MiB, 2 * MiB)]

    readings = itertools.count(1000.0, 0.25)
    monkeypatch.setattr(copying, "time", SimpleNamespace(monotonic=lambda: next(readings)))
    paced = Progress()
    copy(downloads / "a.mkv", library / "b.mkv", chunk_size=64 * 1024, progress=paced)
    *between, last = paced.calls
    assert last == (2 * MiB, 2 * MiB)
    assert 0 < len(between) <= (2 * MiB // (64 * 1024)) // 2, between


def test_a_cancel_between_chunks_removes_the_temporary_file(downloads: Path, library: Path) -> None:
    write_random(downloads / "a.mkv", 1 * MiB)
    checks = 0

    def cancel_at_third_chunk() -> None:
        nonlocal checks
        checks += 1
        if checks == 3:
            raise Canceled()

    with pytest.raises(Canceled):
        copy(
            downloads / "a.mkv",
            library / "a.mkv",
            chunk_size=64 * 1024,
            check=cancel_at_third_chunk,
        )

    assert checks == 3
    assert os.listdir(library) == []
    assert not hasher_threads()


@pytest.mark.timeout(60)
def test_a_cancel_does_not_wait_for_a_disk_that_is_slow_to_take_writes(
    downloads: Path, library: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Starting the write-back can wait for room in a slow device's queue; the copy does not
    wait with it: a cancel stops it between chunks and removes the temporary file."""
    write_random(downloads / "a.mkv", 24 * MiB)
    queue_full, released = threading.Event(), threading.Event()

    def stuck_sync_file_range(fd: int, offset: int, count: int, flags: int) -> int:
        queue_full.set()
        released.wait(120)  # longer than the test may take: a copy waiting here never ends
        return 0

    monkeypatch.setattr(transfer, "_sync_file_range", lambda: stuck_sync_file_range)
    checks = 0

    def cancel_late() -> None:  # after the first 8 MiB asked for their write-back
        nonlocal checks
        checks += 1
        if checks > 16:
            assert queue_full.wait(30)
            raise Canceled()

    try:
        for verify in ("size", "sha256", "pieces"):
            checks = 0
            with pytest.raises(Canceled):
                copy(downloads / "a.mkv", library / "a.mkv", check=cancel_late, verify=verify,
                     chunk_size=MiB, pieces=one_piece_per_mib(downloads / "a.mkv"))
            assert os.listdir(library) == []
    finally:
        released.set()


def one_piece_per_mib(path: Path) -> importer.FilePieces:
    data = path.read_bytes()
    return importer.FilePieces(MiB, len(data), tuple(
        hashlib.sha1(data[i : i + MiB]).digest() for i in range(0, len(data), MiB)))


def test_before_rename_sees_the_complete_file_and_its_failure_publishes_nothing(
    downloads: Path, library: Path
) -> None:
    data = write_random(downloads / "a.mkv", 500_000)
    dest = library / "a.mkv"
    seen: list[ImportResult] = []

    def lease_lost(result: ImportResult) -> None:
        seen.append(result)
        assert partial_path(dest).read_bytes() == data
        assert not dest.exists()
        raise Canceled()

    with pytest.raises(Canceled):
        copy(downloads / "a.mkv", dest, before_rename=lease_lost)

    assert [(r.dest, r.size, r.sha256, r.method) for r in seen] == [
        (dest, len(data), hashlib.sha256(data).hexdigest(), "copy")
    ]
    assert os.listdir(library) == []


def test_a_stray_temporary_file_from_a_crashed_attempt_is_replaced(
    downloads: Path, library: Path
) -> None:
    data = write_random(downloads / "a.mkv", 200_000)
    dest = library / "a.mkv"
    write_random(partial_path(dest), 300_000, seed=2)  # half-written by a killed worker

    result = copy(downloads / "a.mkv", dest)

    assert dest.read_bytes() == data and result.size == len(data)
    assert os.listdir(library) == ["a.mkv"]


def test_a_stray_temporary_symlink_is_removed_not_followed(
    downloads: Path, library: Path, tmp_path: Path
) -> None:
    data = write_random(downloads / "a.mkv", 10_000)
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me")
    partial_path(library / "a.mkv").symlink_to(precious)

    copy(downloads / "a.mkv", library / "a.mkv")

    assert precious.read_text() == "keep me"
    assert (library / "a.mkv").read_bytes() == data
    assert os.listdir(library) == ["a.mkv"]


def test_remove_stray_partial(library: Path) -> None:
    dest = library / "a.mkv"
    assert remove_stray_partial(dest) is False
    partial_path(dest).write_bytes(b"x")
    assert partial_path(dest).name == ".a.mkv.umt-partial"
    assert remove_stray_partial(dest) is True
    assert os.listdir(library) == []


def test_the_temporary_name_of_a_long_file_name_stays_within_name_max(library: Path) -> None:
    dest = library / ("é" * 125 + ".mkv")  # 254 bytes
    partial = partial_path(dest)
    assert len(os.fsencode(partial.name)) <= 255
    assert partial == partial_path(dest) and partial.parent == library
    partial.write_bytes(b"x")  # the filesystem accepts it


def test_a_source_modified_during_the_copy_is_refused(downloads: Path, library: Path) -> None:
    write_random(downloads / "a.mkv", 1 * MiB)
    checks = 0

    def append_to_source() -> None:
        nonlocal checks
        checks += 1
        if checks == 2:
            with open(downloads / "a.mkv", "ab") as file:
                file.write(b"more")

    with pytest.raises(SourceChanged, match="changed while"):
        copy(downloads / "a.mkv", library / "a.mkv", chunk_size=128 * 1024, check=append_to_source)
    assert os.listdir(library) == []


def test_an_existing_library_file_is_not_overwritten(downloads: Path, library: Path) -> None:
    data = write_random(downloads / "a.mkv", 1000)
    (library / "a.mkv").write_text("someone else's file")

    for mode in ("copy", "auto", "hardlink"):
        with pytest.raises(DestinationExists, match="never replaces a library file"):
            copy(downloads / "a.mkv", library / "a.mkv", mode=mode)
    assert (library / "a.mkv").read_text() == "someone else's file"
    assert os.listdir(library) == ["a.mkv"]
    assert (downloads / "a.mkv").read_bytes() == data


@pytest.mark.parametrize("renameat2", [True, False], ids=["renameat2", "link-fallback"])
@pytest.mark.parametrize("mode", ["copy", "hardlink"])
def test_a_file_that_appears_while_importing_is_never_replaced(
    downloads: Path, library: Path, monkeypatch: pytest.MonkeyPatch, renameat2: bool, mode: str
) -> None:
    """The check before the copy is not the guarantee: the publish itself refuses to replace."""
    if not renameat2:
        monkeypatch.setattr(publishing, "_rename_noreplace", lambda partial, dest: False)
    write_random(downloads / "a.mkv", 300_000)
    dest = library / "a.mkv"

    def another_writer_got_there_first(result: ImportResult) -> None:
        dest.write_bytes(b"the other run's content")

    with pytest.raises(DestinationExists):
        copy(downloads / "a.mkv", dest, mode=mode, before_rename=another_writer_got_there_first)
    assert dest.read_bytes() == b"the other run's content"
    assert os.listdir(library) == ["a.mkv"]


@pytest.mark.parametrize("renameat2", [True, False], ids=["renameat2", "link-fallback"])
def test_a_publish_leaves_one_name_holding_the_complete_file(
    downloads: Path, library: Path, monkeypatch: pytest.MonkeyPatch, renameat2: bool
) -> None:
    if not renameat2:
        monkeypatch.setattr(publishing, "_rename_noreplace", lambda partial, dest: False)
    data = write_random(downloads / "a.mkv", 300_000)
    result = copy(downloads / "a.mkv", library / "a.mkv")
    assert os.listdir(library) == ["a.mkv"]
    assert (library / "a.mkv").read_bytes() == data
    assert (result.device, result.inode) == (
        (library / "a.mkv").stat().st_dev, (library / "a.mkv").stat().st_ino
    )


def test_an_import_is_recognised_by_its_identity_never_by_an_equal_size(
    downloads: Path, library: Path
) -> None:
    write_random(downloads / "a.mkv", 4096)
    result = copy(downloads / "a.mkv", library / "a.mkv")
    detail = {"size": result.size, "device": result.device, "inode": result.inode,
              "mtime_ns": result.mtime_ns, "sha256": result.sha256}
    assert importer.holds_import(library / "a.mkv", detail)

    (library / "a.mkv").unlink()
    (library / "a.mkv").write_bytes(os.urandom(4096))  # another file of the same size
    assert not importer.holds_import(library / "a.mkv", detail)
    without_identity = {"size": 4096, "sha256": result.sha256}
    assert not importer.holds_import(library / "a.mkv", without_identity)
    assert not importer.holds_import(library / "a.mkv", {"size": 4096, "sha256": None})


def test_a_missing_destination_folder_is_an_import_failure(downloads: Path, library: Path) -> None:
    write_random(downloads / "a.mkv", 1000)
    with pytest.raises(importer.ImportFailure, match="No such file"):
        copy(downloads / "a.mkv", library / "missing" / "a.mkv")


def test_bad_arguments_are_refused_before_anything_happens(downloads: Path, library: Path) -> None:
    write_random(downloads / "a.mkv", 1000)
    with pytest.raises(ValueError, match="import mode"):
        copy(downloads / "a.mkv", library / "a.mkv", mode="move")
    with pytest.raises(ValueError, match="verify"):
        copy(downloads / "a.mkv", library / "a.mkv", verify="md5")
    assert os.listdir(library) == []


# --------------------------------------------------------------------------- hardlink / reflink


def test_hardlink_on_the_same_filesystem_shares_the_inode(downloads: Path, library: Path) -> None:
    write_random(downloads / "a.mkv", 5000)
    progress = Progress()

    result = copy(downloads / "a.mkv", library / "a.mkv", mode="hardlink", progress=progress)

    assert (library / "a.mkv").stat().st_ino == (downloads / "a.mkv").stat().st_ino
    assert (result.method, result.sha256, result.size) == ("hardlink", None, 5000)
    assert progress.calls == [(5000, 5000)]
    assert os.listdir(library) == ["a.mkv"]


def test_auto_hardlinks_on_the_same_filesystem(downloads: Path, library: Path) -> None:
    write_random(downloads / "a.mkv", 5000)
    result = copy(downloads / "a.mkv", library / "a.mkv", mode="auto")
    assert result.method == "hardlink"
    assert (library / "a.mkv").stat().st_nlink == 2


def test_a_hardlink_made_by_an_earlier_attempt_counts_as_done(
    downloads: Path, library: Path
) -> None:
    write_random(downloads / "a.mkv", 5000)
    first = copy(downloads / "a.mkv", library / "a.mkv", mode="hardlink")
    again = copy(downloads / "a.mkv", library / "a.mkv", mode="hardlink")
    assert again == first


def test_hardlink_across_filesystems_fails_clearly(downloads: Path, other_filesystem: Path) -> None:
    write_random(downloads / "a.mkv", 5000)

    with pytest.raises(CrossDevice) as failure:
        copy(downloads / "a.mkv", other_filesystem / "a.mkv", mode="hardlink")

    message = str(failure.value)
    assert str(downloads) in message and str(other_filesystem) in message
    assert 'import_mode = "copy"' in message and "\n" not in message
    assert os.listdir(other_filesystem) == []


def test_auto_across_filesystems_copies(downloads: Path, other_filesystem: Path) -> None:
    data = write_random(downloads / "a.mkv", 3 * MiB)

    result = copy(downloads / "a.mkv", other_filesystem / "a.mkv", mode="auto")

    assert result.method in ("copy", "reflink")
    assert (other_filesystem / "a.mkv").read_bytes() == data
    assert os.listdir(other_filesystem) == ["a.mkv"]


def test_auto_reflinks_across_btrfs_subvolumes(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        skip_unavailable("reflink import", "making a btrfs filesystem needs root")
    if shutil.which("mkfs.btrfs") is None:
        pytest.skip("needs mkfs.btrfs (btrfs-progs) to make a reflink-capable filesystem")
    image, mountpoint = tmp_path / "btrfs.img", tmp_path / "btrfs"
    with open(image, "wb") as sparse:
        sparse.truncate(128 * MiB)
    if subprocess.run(["mkfs.btrfs", "-q", str(image)], capture_output=True).returncode != 0:
        pytest.skip("mkfs.btrfs failed")
    mountpoint.mkdir()
    mount = subprocess.run(
        ["mount", "-o", "loop", str(image), str(mountpoint)], capture_output=True
    )
    if mount.returncode != 0:
        skip_unavailable("reflink import", "this machine refuses to loop-mount a btrfs "
                         f"image: {mount.stderr.decode().strip()}")
    try:
        for name in ("downloads", "library"):
            subvolume = ["btrfs", "subvolume", "create", str(mountpoint / name)]
            subprocess.run(subvolume, check=True, capture_output=True)
        data = write_random(mountpoint / "downloads" / "a.mkv", 2 * MiB)
        src, library = mountpoint / "downloads" / "a.mkv", mountpoint / "library"

        reflinked = copy(src, library / "a.mkv", mode="auto")
        copied = copy(src, library / "b.mkv", mode="copy")

        assert (reflinked.method, reflinked.sha256) == ("reflink", None)
        assert (copied.method, copied.sha256) == ("copy", hashlib.sha256(data).hexdigest())
        assert (library / "a.mkv").read_bytes() == data
        with pytest.raises(CrossDevice):
            copy(src, library / "c.mkv", mode="hardlink")
        assert sorted(os.listdir(library)) == ["a.mkv", "b.mkv"]
    finally:
        subprocess.run(["umount", str(mountpoint)], check=True)


# --------------------------------------------------------------------------- full disk, read-only


def test_a_file_bigger_than_the_free_space_is_refused_up_front(
    downloads: Path, tmp_path: Path
) -> None:
    write_random(downloads / "a.mkv", 4 * MiB)
    with mounted_tmpfs(tmp_path / "small", "size=1m") as small:
        with pytest.raises(NoSpace) as failure:
            copy(downloads / "a.mkv", small / "a.mkv")
        assert str(small) in str(failure.value) and "4.0 MiB needed" in str(failure.value)
        assert failure.value.__cause__ is None  # refused by the free-space check, not by write()
        assert os.listdir(small) == []


def test_a_disk_filling_up_during_the_copy_raises_no_space(downloads: Path, tmp_path: Path) -> None:
    write_random(downloads / "a.mkv", 3 * MiB)
    with mounted_tmpfs(tmp_path / "small", "size=4m") as small:
        checks = 0

        def someone_else_fills_the_disk() -> None:
            nonlocal checks
            checks += 1
            if checks == 2:
                (small / "filler").write_bytes(bytes(2 * MiB))

        with pytest.raises(NoSpace, match=str(small)) as failure:
            copy(
                downloads / "a.mkv",
                small / "a.mkv",
                check=someone_else_fills_the_disk,
                chunk_size=256 * 1024,
            )
        cause = failure.value.__cause__
        assert isinstance(cause, OSError) and cause.errno == errno.ENOSPC  # from write()
        assert os.listdir(small) == ["filler"]


def test_a_read_only_destination_raises_a_permission_error(downloads: Path, tmp_path: Path) -> None:
    write_random(downloads / "a.mkv", 1000)
    with mounted_tmpfs(tmp_path / "readonly", "ro,size=1m") as readonly:
        with pytest.raises(ImportPermissionError, match="Read-only file system"):
            copy(downloads / "a.mkv", readonly / "a.mkv")
        assert os.listdir(readonly) == []


# --------------------------------------------------------------------------- re-execution helpers


def test_ensure_dir_inside_creates_and_reports_the_missing_folders(library: Path) -> None:
    target = library / "Movies" / "Title (2023)"

    created = ensure_dir_inside(target, library)

    assert created == [library / "Movies", target] and target.is_dir()
    assert ensure_dir_inside(target, library) == []
    assert remove_empty_dirs(created) == [target, library / "Movies"]
    assert os.listdir(library) == []


def test_remove_empty_dirs_keeps_folders_with_content(library: Path) -> None:
    created = ensure_dir_inside(library / "a" / "b", library)
    (library / "a" / "keep.txt").write_text("x")
    assert remove_empty_dirs(created) == [library / "a" / "b"]
    assert (library / "a" / "keep.txt").exists()


def test_ensure_dir_inside_refuses_to_leave_the_library(library: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (library / "escape").symlink_to(outside)
    before = sorted(os.listdir(tmp_path))

    with pytest.raises(UnsafePath):
        ensure_dir_inside(library / "escape" / "x", library)
    with pytest.raises(UnsafePath):
        ensure_dir_inside(library / ".." / "x", library)

    assert sorted(os.listdir(tmp_path)) == before and os.listdir(outside) == []


def test_ensure_dir_inside_needs_the_library_root(tmp_path: Path) -> None:
    with pytest.raises(LibraryRootMissing, match="mounted"):
        ensure_dir_inside(tmp_path / "unmounted" / "Movies", tmp_path / "unmounted")
    assert not (tmp_path / "unmounted").exists()
