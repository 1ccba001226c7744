"""``bench/run parse``: how long ``umt start-acquire`` takes to read a .torrent of many files.

    bench/run parse [--runs 5] [--torf]

Builds torrents of 1,000, 10,000 and 100,000 files (two folder levels, 1 KiB files, 1 MiB
pieces) and times ``umt.media.sources.parse_torrent_bytes`` on each (median of ``--runs``).
``--torf`` also times what umt used before, ``torf.Torrent.read_stream`` plus its file list, at
1,000 and 10,000 files (100,000 would take more than ten minutes: its file list is quadratic).
"""

from __future__ import annotations

import argparse
import statistics
import time

from umt.media.sources import parse_torrent_bytes


def _bencode(value: object) -> bytes:
    if isinstance(value, int):
        return b"i%de" % value
    if isinstance(value, bytes):
        return b"%d:%s" % (len(value), value)
    if isinstance(value, list):
        return b"l" + b"".join(_bencode(item) for item in value) + b"e"
    assert isinstance(value, dict)
    return b"d" + b"".join(_bencode(k) + _bencode(v) for k, v in sorted(value.items())) + b"e"


def torrent_of(count: int) -> bytes:
    files = [{b"length": 1024, b"path": [b"d%03d" % (i % 100), b"f%06d.mkv" % i]}
             for i in range(count)]
    piece = 1 << 20
    pieces = b"\1" * 20 * -(-(1024 * count) // piece)
    info = {b"name": b"Many", b"piece length": piece, b"pieces": pieces, b"files": files}
    return _bencode({b"announce": b"http://127.0.0.1:1/a", b"info": info})


def _median_seconds(function: object, data: bytes, runs: int) -> float:
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        function(data)  # type: ignore[operator]
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def _torf(data: bytes) -> None:
    import torf

    [str(f) for f in torf.Torrent.read_stream(data).files]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/run parse", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--torf", action="store_true")
    args = parser.parse_args(argv)
    print("| files | .torrent size | umt parse (median) | torf (median) |")
    print("| ---: | ---: | ---: | ---: |")
    for count in (1_000, 10_000, 100_000):
        data = torrent_of(count)
        ours = _median_seconds(parse_torrent_bytes, data, args.runs)
        theirs = "-"
        if args.torf and count <= 10_000:
            theirs = f"{_median_seconds(_torf, data, max(1, args.runs // 5)) * 1000:.0f} ms"
        print(f"| {count:,} | {len(data) / 1e6:.1f} MB | {ours * 1000:.0f} ms | {theirs} |",
              flush=True)
    return 0
