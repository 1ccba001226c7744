"""A bounded, linear bencode decoder for .torrent files, which come from strangers.

The maintained decoders on PyPI (bencode2, fastbencode) refuse dictionaries whose keys are not
sorted, which real torrents have and qBittorrent accepts; torf's file list is quadratic (a
torrent of 10,000 files took 11 s, 100,000 files more than ten minutes). This one is one pass
without recursion, refuses nesting deeper than :data:`MAX_DEPTH`, and reports where the
top-level ``info`` value starts and ends, because the info-hash is the SHA-1 of those exact
bytes (re-encoding a decoded dictionary gives another hash for non-canonical torrents).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["MAX_DEPTH", "BencodeError", "Decoded", "decode"]

#: Torrents nest four levels (top, info, files, a file's path); leave room, refuse abuse.
MAX_DEPTH = 32
_INTEGER = re.compile(rb"i(-?(?:0|[1-9][0-9]{0,19}))e")
_LENGTH = re.compile(rb"(0|[1-9][0-9]{0,11}):")
_LIST, _DICT, _END, _INT = ord("l"), ord("d"), ord("e"), ord("i")


class BencodeError(ValueError):
    """The bytes are not bencode, or exceed a bound."""


class Decoded:
    """The decoded top-level value and the byte span of its ``info`` value, if any."""

    __slots__ = ("info_span", "value")

    def __init__(self, value: Any, info_span: tuple[int, int] | None) -> None:
        self.value = value
        self.info_span = info_span


def decode(data: bytes) -> Decoded:
    """Decode one bencoded value (bytes after it are ignored, as BitTorrent clients do)."""
    containers: list[list[Any] | dict[bytes, Any]] = []
    pending_keys: list[bytes | None] = []
    starts: list[int] = []
    info_span: tuple[int, int] | None = None
    pos = 0
    end = len(data)
    while True:
        if pos >= end:
            raise BencodeError("truncated bencode")
        start = pos
        head = data[pos]
        value: Any
        if head in (_LIST, _DICT):
            if len(containers) >= MAX_DEPTH:
                raise BencodeError(f"nested deeper than {MAX_DEPTH} levels")
            containers.append([] if head == _LIST else {})
            pending_keys.append(None)
            starts.append(pos)
            pos += 1
            continue
        if head == _END:
            if not containers:
                raise BencodeError(f"unexpected end marker at byte {pos}")
            if pending_keys.pop() is not None:
                raise BencodeError(f"dictionary key without a value before byte {pos}")
            value = containers.pop()
            start = starts.pop()
            pos += 1
        elif head == _INT:
            match = _INTEGER.match(data, pos)
            if match is None:
                raise BencodeError(f"bad integer at byte {pos}")
            value = int(match.group(1))
            pos = match.end()
        else:
            match = _LENGTH.match(data, pos)
            if match is None:
                raise BencodeError(f"bad bencode at byte {pos}")
            pos = match.end() + int(match.group(1))
            if pos > end:
                raise BencodeError("truncated bencode string")
            value = data[match.end() : pos]
        if not containers:
            return Decoded(value, info_span)
        parent = containers[-1]
        if isinstance(parent, list):
            parent.append(value)
            continue
        key = pending_keys[-1]
        if key is None:
            if not isinstance(value, bytes):
                raise BencodeError(f"dictionary key at byte {start} is not a string")
            if value in parent:
                raise BencodeError(f"duplicate dictionary key {value[:40]!r} at byte {start}")
            pending_keys[-1] = value
            continue
        parent[key] = value
        pending_keys[-1] = None
        if key == b"info" and len(containers) == 1:
            info_span = (start, pos)
