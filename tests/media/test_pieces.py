"""Piece verification without qBittorrent: torrents made by torf, files on a real filesystem.

(The same checks against real qbittorrent-nox, through a whole run, are in
``test_verified_import.py``.)
"""

from __future__ import annotations

import errno
import hashlib
import os
import random
import threading
from pathlib import Path

import pytest
import torf

from tests.support.qbittorrent import flip_byte
from umt.media.importing import (
    FilePieces,
    ImportFailure,
    PieceMismatch,
    check_file_pieces,
    copying,
    import_file,
    partial_path,
    transfer,
)
from umt.media.importing import pieces as pieces_module
from umt.media.importing.pieces import PieceHasher
from umt.media.torrent_pieces import PiecesUnavailable, TorrentLayout

PIECE = 16 * 1024
#: Not multiples of the piece length: every file but the first shares a piece with another.
SIZES = {"a.nfo": 10_000, "b.mkv": 40_000, "c.txt": 5, "d.mkv": 70_001, "e.srt": 0}


def no_check() -> None:
    return None


def write_files(folder: Path, sizes: dict[str, int]) -> None:
    folder.mkdir(parents=True)
    rng = random.Random(5)
    for name, size in sizes.items():
        (folder / name).write_bytes(rng.randbytes(size))


def torf_layout(folder: Path, piece: int = PIECE) -> TorrentLayout:
    """The layout qBittorrent would report for a torrent of ``folder``, from its metainfo."""
    torrent = torf.Torrent(path=folder, piece_size=piece)
    torrent.generate()
    files = torrent.metainfo["info"]["files"]
    paths = [folder.joinpath(*entry["path"]) for entry in files]
    sizes = [int(entry["length"]) for entry in files]
    return TorrentLayout.build(piece, list(torrent.hashes), paths, sizes, [None] * len(files))


def import_copy(src: Path, dest: Path, pieces: FilePieces) -> int | None:
    result = import_file(src, dest, mode="copy", check=no_check, progress=lambda *_: None,
                         verify="pieces", pieces=pieces)
    return result.pieces


@pytest.fixture
def download(tmp_path: Path) -> Path:
    folder = tmp_path / "downloads" / "Show"
    write_files(folder, SIZES)
    return folder


@pytest.fixture
def library(tmp_path: Path) -> Path:
    folder = tmp_path / "library"
    folder.mkdir()
    return folder


def test_every_file_of_a_multi_file_torrent_is_verified_across_piece_boundaries(
    download: Path, library: Path
) -> None:
    layout = torf_layout(download)
    for name in SIZES:
        pieces = layout.pieces_of(layout.index_of(download / name))
        checked = import_copy(download / name, library / name, pieces)
        assert (library / name).read_bytes() == (download / name).read_bytes()
        assert checked == len(pieces.hashes)
    # b.mkv starts 10,000 bytes into piece 0 and ends inside piece 3, shared with c and d.
    b = layout.pieces_of(layout.index_of(download / "b.mkv"))
    assert (b.first_piece, len(b.hashes), len(b.head), len(b.tail)) == (0, 4, 10_000, 15_536)


@pytest.mark.parametrize("flip", [None, 3 * 1024 * 1024 + 5])
def test_pieces_larger_than_a_buffer_are_hashed_from_several_chunks(
    tmp_path: Path, library: Path, flip: int | None
) -> None:
    """2 MiB pieces arrive in 1 MiB chunks; the file starts and ends inside a piece."""
    folder = tmp_path / "big"
    write_files(folder, {"a.nfo": 300_000, "b.mkv": 5 * 1024 * 1024 + 3, "c.srt": 100_000})
    layout = torf_layout(folder, piece=2 * 1024 * 1024)
    pieces = layout.pieces_of(layout.index_of(folder / "b.mkv"))
    assert pieces.head and pieces.tail and len(pieces.hashes) == 3
    if flip is None:
        assert import_copy(folder / "b.mkv", library / "b.mkv", pieces) == 3
        return
    flip_byte(folder / "b.mkv", flip)
    with pytest.raises(PieceMismatch, match="piece 1 "):
        import_copy(folder / "b.mkv", library / "b.mkv", pieces)
    assert list(library.iterdir()) == []


@pytest.mark.timeout(60)
def test_a_source_that_ends_early_fails_instead_of_waiting(tmp_path: Path) -> None:
    """The hashing threads wait for chunks; a copy that stops short must not leave them so."""
    src, dst = tmp_path / "src.mkv", tmp_path / "dst.mkv"
    write_files(tmp_path / "x", {"f.mkv": 3 * 1024 * 1024})
    data = (tmp_path / "x" / "f.mkv").read_bytes()
    length = 2 * 1024 * 1024
    pieces = FilePieces(length, len(data), tuple(
        hashlib.sha1(data[i : i + length]).digest() for i in range(0, len(data), length)))
    src.write_bytes(data[:length])  # shorter than the torrent says, ending on a buffer
    with open(src, "rb") as source, open(dst, "w+b") as target:
        hasher = PieceHasher(pieces, len(data), "f.mkv", target.fileno())
        with pytest.raises(ImportFailure, match="ended after 2097152 bytes, before the 3145728"):
            copying.copy_data(source.fileno(), target.fileno(), total=len(data),
                              chunk_size=1024 * 1024, hashing=False, check=no_check,
                              progress=lambda *_: None, pieces=hasher)


class Canceled(BaseException):
    """What the engine's check() raises for a cancel or a lost lease."""


def one_file_pieces(path: Path, length: int) -> FilePieces:
    data = path.read_bytes()
    return FilePieces(length, len(data), tuple(
        hashlib.sha1(data[i : i + length]).digest() for i in range(0, len(data), length)))


def pieces_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("umt-pieces")]


def test_a_byte_changed_on_its_way_into_the_library_is_caught(
    tmp_path: Path, library: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pieces are hashed from the copy as written, not from what was read of the download:
    a write that lands wrong (here: one byte of the third MiB) fails the import."""
    write_files(tmp_path / "x", {"f.mkv": 5 * 1024 * 1024})
    src = tmp_path / "x" / "f.mkv"
    real_copy = transfer.KernelCopy.copy

    def copy_with_a_bad_write(self: transfer.KernelCopy, offset: int, count: int) -> int:
        done = real_copy(self, offset, count)
        if offset <= 2 * 1024 * 1024 + 7 < offset + done:
            flip_byte(partial_path(library / "f.mkv"), 2 * 1024 * 1024 + 7)
        return done

    monkeypatch.setattr(transfer.KernelCopy, "copy", copy_with_a_bad_write)
    with pytest.raises(PieceMismatch, match="piece 1 "):
        import_copy(src, library / "f.mkv", one_file_pieces(src, 2 * 1024 * 1024))
    assert list(library.iterdir()) == []


def test_a_filesystem_that_cannot_sendfile_gets_the_same_verified_copy(
    download: Path, library: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unsupported(*args: object) -> int:
        raise OSError(errno.EINVAL, "sendfile not supported here")

    monkeypatch.setattr(transfer.os, "sendfile", unsupported)
    layout = torf_layout(download)
    for name in ("b.mkv", "d.mkv"):
        pieces = layout.pieces_of(layout.index_of(download / name))
        assert import_copy(download / name, library / name, pieces) == len(pieces.hashes)
        assert (library / name).read_bytes() == (download / name).read_bytes()


@pytest.mark.timeout(60)
def test_a_cancel_is_noticed_while_the_copy_waits_for_the_hashing_threads(
    tmp_path: Path, library: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hashing threads are stuck (a busy machine), so the copy waits for room in its window
    of unhashed chunks: it keeps calling check() while it waits, and stops at the cancel."""
    write_files(tmp_path / "x", {"f.mkv": 16 * 1024 * 1024})  # 16 chunks, more than the window
    src = tmp_path / "x" / "f.mkv"
    stuck, release = threading.Event(), threading.Event()
    real_read_back = pieces_module.read_back

    def slow_read_back(fd: int, offset: int, count: int) -> memoryview:
        stuck.set()
        release.wait(30)
        return real_read_back(fd, offset, count)

    monkeypatch.setattr(pieces_module, "read_back", slow_read_back)
    checks = 0

    def cancel_once_waiting() -> None:  # more checks than chunks: some came from the wait
        nonlocal checks
        checks += 1
        if checks > 20 and stuck.is_set():
            release.set()
            raise Canceled()

    with pytest.raises(Canceled):
        import_file(src, library / "f.mkv", mode="copy", check=cancel_once_waiting,
                    progress=lambda *_: None, verify="pieces",
                    pieces=one_file_pieces(src, 2 * 1024 * 1024))
    assert list(library.iterdir()) == []
    assert not pieces_threads()


def test_a_flipped_byte_fails_the_import_and_leaves_nothing(
    download: Path, library: Path
) -> None:
    layout = torf_layout(download)
    pieces = layout.pieces_of(layout.index_of(download / "d.mkv"))
    flip_byte(download / "d.mkv", 50_000)
    with pytest.raises(PieceMismatch, match=r"d\.mkv does not match its torrent: piece \d+"):
        import_copy(download / "d.mkv", library / "d.mkv", pieces)
    assert list(library.iterdir()) == []
    assert not partial_path(library / "d.mkv").exists()


def test_the_neighbours_bytes_in_a_shared_piece_are_part_of_the_check(
    download: Path, library: Path
) -> None:
    """b.mkv is intact, but the piece it shares with a.nfo is not what the torrent says."""
    layout = torf_layout(download)
    flip_byte(download / "a.nfo", 9_999)
    pieces = layout.pieces_of(layout.index_of(download / "b.mkv"))
    with pytest.raises(PieceMismatch, match="piece 0 "):
        import_copy(download / "b.mkv", library / "b.mkv", pieces)
    assert list(library.iterdir()) == []




def test_a_file_of_another_size_than_the_torrents_is_refused(
    download: Path, library: Path
) -> None:
    layout = torf_layout(download)
    pieces = layout.pieces_of(layout.index_of(download / "b.mkv"))
    with open(download / "b.mkv", "ab") as file:
        file.write(b"x")
    with pytest.raises(PieceMismatch, match="not the file its torrent describes"):
        import_copy(download / "b.mkv", library / "b.mkv", pieces)
    assert list(library.iterdir()) == []


def test_check_file_pieces_reads_a_library_file_again(download: Path, library: Path) -> None:
    layout = torf_layout(download)
    pieces = layout.pieces_of(layout.index_of(download / "d.mkv"))
    import_copy(download / "d.mkv", library / "d.mkv", pieces)
    assert check_file_pieces(library / "d.mkv", pieces, check=no_check) == len(pieces.hashes)
    flip_byte(library / "d.mkv", 0)
    with pytest.raises(PieceMismatch):
        check_file_pieces(library / "d.mkv", pieces, check=no_check)


def test_piece_aligned_files_with_zero_padding_are_recognised(tmp_path: Path) -> None:
    """Hybrid v1+v2 torrents start every file on a piece boundary, padding with zeros."""
    folder = tmp_path / "hybrid"
    write_files(folder, {"x.mkv": 20_000, "y.mkv": 9_000})
    x, y = (folder / "x.mkv").read_bytes(), (folder / "y.mkv").read_bytes()
    stream = x + bytes(2 * PIECE - len(x)) + y
    hashes = [hashlib.sha1(stream[i : i + PIECE]).digest() for i in range(0, len(stream), PIECE)]
    layout = TorrentLayout.build(PIECE, hashes, [folder / "x.mkv", folder / "y.mkv"],
                                 [20_000, 9_000], [(0, 1), (2, 2)])
    assert layout.starts == (0, 2 * PIECE)
    for name in ("x.mkv", "y.mkv"):
        pieces = layout.pieces_of(layout.index_of(folder / name))
        assert check_file_pieces(folder / name, pieces, check=no_check) == len(pieces.hashes)
    # The same torrent with its padding file listed (never on disk): zeros all the same.
    listed = TorrentLayout.build(
        PIECE, hashes, [folder / "x.mkv", folder / ".pad" / "12768", folder / "y.mkv"],
        [20_000, 2 * PIECE - 20_000, 9_000], [None, None, None])
    pieces = listed.pieces_of(listed.index_of(folder / "x.mkv"))
    assert check_file_pieces(folder / "x.mkv", pieces, check=no_check) == 2


def test_a_torrent_without_v1_hashes_or_with_unknown_padding_is_unavailable(
    tmp_path: Path,
) -> None:
    with pytest.raises(PiecesUnavailable, match="v2-only"):
        TorrentLayout.build(PIECE, [], [tmp_path / "x"], [10], [(0, 0)])
    with pytest.raises(PiecesUnavailable, match="do not line up"):
        TorrentLayout.build(PIECE, [bytes(20)] * 3, [tmp_path / "x", tmp_path / "y"],
                            [10, 10], [(0, 0), (2, 2)])


def test_a_missing_neighbour_makes_the_edge_pieces_unavailable(download: Path) -> None:
    layout = torf_layout(download)
    os.unlink(download / "a.nfo")
    with pytest.raises(PiecesUnavailable, match=r"cannot read a\.nfo"):
        layout.pieces_of(layout.index_of(download / "b.mkv"))
