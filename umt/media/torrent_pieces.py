"""Where each file of a torrent sits among its pieces, and the piece hashes of one file.

qBittorrent reports the v1 piece hashes (``torrents/pieceHashes``, for magnets too once the
metadata is known), the piece length (``torrents/properties``) and the files in torrent order
with their sizes and piece ranges (``torrents/files``). The files follow each other in the
torrent's byte stream, either back to back (v1) or each starting on a piece boundary with zero
padding between them (hybrid v1+v2 torrents; qBittorrent does not list the padding files, and
``.pad/<n>`` files that it would list are read as zeros): the layout whose piece ranges and
piece count match qBittorrent's is the one used. A file's first and last piece may hold bytes
of its neighbours; those are read from the download folder.

Only v1 hashes are used. A v2-only torrent has none: its import falls back to ``sha256``.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from umt.media.importing import FilePieces
from umt.media.qbittorrent import QbtClient, TorrentFile, TorrentInfo


class PiecesUnavailable(Exception):
    """The torrent's pieces cannot be used to check this file; the message says why."""


@dataclass(frozen=True)
class TorrentLayout:
    piece_length: int
    hashes: tuple[bytes, ...]
    #: Each file's path as umt sees it, its size and where it starts in the byte stream.
    paths: tuple[Path, ...]
    sizes: tuple[int, ...]
    starts: tuple[int, ...]

    @classmethod
    def build(cls, piece_length: int, hashes: Sequence[bytes], paths: Sequence[Path],
              sizes: Sequence[int], ranges: Sequence[tuple[int, int] | None]) -> TorrentLayout:
        """The first layout (back to back, then piece-aligned) that matches the torrent."""
        if piece_length <= 0:
            raise PiecesUnavailable("qBittorrent reports no piece length")
        if not hashes:
            raise PiecesUnavailable("qBittorrent has no v1 piece hashes (a v2-only torrent?)")
        for aligned in (False, True):
            starts = _starts(sizes, piece_length, aligned=aligned)
            layout = cls(piece_length, tuple(hashes), tuple(paths), tuple(sizes), starts)
            if layout._matches(ranges):
                return layout
        raise PiecesUnavailable(
            "the files do not line up with the torrent's pieces (unknown padding)"
        )

    @property
    def total(self) -> int:
        return self.starts[-1] + self.sizes[-1] if self.sizes else 0

    @cached_property
    def _indexes(self) -> dict[Path, int]:
        return {path.resolve(): index for index, path in enumerate(self.paths)}

    def index_of(self, path: Path) -> int:
        index = self._indexes.get(path.resolve())
        if index is None:
            raise PiecesUnavailable(f"{path.name} is not a file of this torrent")
        return index

    def pieces_of(self, index: int) -> FilePieces:
        """The pieces file ``index`` touches, with its neighbours' bytes in the edge pieces."""
        start, size, length = self.starts[index], self.sizes[index], self.piece_length
        if size == 0:
            return FilePieces(length, 0, ())
        first, last = start // length, (start + size - 1) // length
        return FilePieces(
            length, size, self.hashes[first : last + 1],
            head=self._read(first * length, start),
            tail=self._read(start + size, min((last + 1) * length, self.total)),
            first_piece=first,
        )

    def _matches(self, ranges: Sequence[tuple[int, int] | None]) -> bool:
        if len(self.hashes) != -(-self.total // self.piece_length):
            return False
        for start, size, reported in zip(self.starts, self.sizes, ranges, strict=True):
            if size and reported is not None and reported != (
                start // self.piece_length, (start + size - 1) // self.piece_length
            ):
                return False
        return True

    def _read(self, begin: int, end: int) -> bytes:
        """The stream's bytes ``[begin, end)``: the files' bytes, zeros for padding."""
        data = bytearray(end - begin)
        # Files start in order: only those from the last one starting at or before ``begin``
        # up to the first one starting at or after ``end`` can hold these bytes.
        first = max(0, bisect.bisect_right(self.starts, begin) - 1)
        last = bisect.bisect_left(self.starts, end, lo=first)
        for index in range(first, last):
            path, start, size = self.paths[index], self.starts[index], self.sizes[index]
            low, high = max(begin, start), min(end, start + size)
            if low >= high or _is_padding(path):
                continue
            try:
                with open(path, "rb", buffering=0) as file:
                    chunk = os.pread(file.fileno(), high - low, low - start)
            except OSError as exc:
                raise PiecesUnavailable(
                    f"cannot read {path.name}, which shares a piece with the file: "
                    f"{exc.strerror or exc}"
                ) from exc
            if len(chunk) != high - low:
                raise PiecesUnavailable(
                    f"{path.name}, which shares a piece with the file, is shorter than its "
                    "torrent says"
                )
            data[low - begin : high - begin] = chunk
        return bytes(data)


def _is_padding(path: Path) -> bool:
    """A BEP 47 padding file (``.pad/<size>``) that a client lists: zeros, never on disk."""
    return path.parent.name == ".pad" and path.name.isdigit()


def _starts(sizes: Sequence[int], piece_length: int, *, aligned: bool) -> tuple[int, ...]:
    starts: list[int] = []
    position = 0
    for size in sizes:
        if aligned and size:
            position = -(-position // piece_length) * piece_length
        starts.append(position)
        position += size
    return tuple(starts)


def layout_of(qbt: QbtClient, torrent: TorrentInfo) -> TorrentLayout:
    """The layout of ``torrent`` as qBittorrent knows it (raises :class:`PiecesUnavailable`)."""
    try:
        hashes = tuple(bytes.fromhex(digest) for digest in qbt.piece_hashes(torrent))
    except ValueError:
        raise PiecesUnavailable("qBittorrent answered piece hashes that are not hex") from None
    files: list[TorrentFile] = qbt.files(torrent.info_hash)
    save_path = Path(torrent.save_path)
    return TorrentLayout.build(
        qbt.piece_size(torrent), hashes, [save_path / file.path for file in files],
        [file.size for file in files], [file.piece_range for file in files],
    )


def pieces_of_file(layout: TorrentLayout, source: Path) -> FilePieces:
    """The pieces of the downloaded file ``source`` (raises :class:`PiecesUnavailable`)."""
    return layout.pieces_of(layout.index_of(source))
