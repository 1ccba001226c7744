"""Import one finished download into the library: hardlink, reflink or verified copy.

Pure filesystem code: it knows nothing about databases, qBittorrent or workflows. The caller
passes two callables: ``check()``, which raises (a ``BaseException`` from the engine) when the
run is canceled or its lease is lost, and ``progress(done_bytes, total_bytes)``.

Modes (``library.import_mode``):

- ``hardlink``: link or fail. A cross-filesystem link raises :class:`CrossDevice`; it never
  falls back silently.
- ``auto``: hardlink when source and destination share a filesystem, else a reflink (FICLONE,
  btrfs/XFS/bcachefs), else a byte copy.
- ``copy``: always a byte copy (never a reflink), hashed while copying.

A copy is moved by the kernel (``sendfile``, chunk by chunk; see
:mod:`umt.media.importing.transfer`) into a deterministic temporary name beside the destination
(see :func:`partial_path`), fsynced, checked, and published under the final name **without ever
replacing a file there** (``renameat2(RENAME_NOREPLACE)``, or on filesystems that cannot do that,
a hard link, which fails on an existing name just as atomically, then the temporary name goes);
then the folder is fsynced. The final name therefore only ever holds a complete file, and never
one that replaced another; a crash leaves at most the temporary file, which the next attempt
removes before starting again.

Each result names the published file's identity (device, inode, modification time): a later
attempt, or a compensation, recognises its own import by that identity, never by an equal size.

What "verify" means here. Every write is checked for completeness, and after ``fsync`` the
destination's size must equal the number of bytes read and the source's size at the start; the
source's size and mtime must not have changed during the copy. This catches short and failed
writes, a full disk and a source modified while it was being copied. On top of that:

- ``verify="pieces"`` (the default; see :mod:`umt.media.importing.pieces`): the bytes written are
  checked against the torrent's own v1 piece hashes (SHA-1) before the publish, on all cores
  while copying; a mismatch raises :class:`PieceMismatch` and nothing is published. The bytes
  hashed are read back from the temporary file (from the page cache, right after they were
  written), so this proves the library file is the published content, not only that the
  download was.
- ``verify="sha256"``: a SHA-256 of the bytes written (read back the same way), computed on a
  helper thread, recorded (the catalog's ``content_hash``) but compared with nothing at import
  time.
- ``verify="size"``: nothing more.

None of them catches corruption below the page cache (disk, controller, network filesystem) of
the destination: only re-reading it does (``umt verify``, or :func:`holds_import` for an import
recorded without its identity). Hardlinks and reflinks share the source's data blocks, so no
bytes pass through umt and their ``sha256`` is ``None``.

The catalog's content hash, chosen with numbers (2 vCPU, one thread: SHA-1 2.1 GB/s and
SHA-256 1.85 GB/s on cache-hot 1 MiB buffers, BLAKE3 5.2 GB/s; ``cp`` of a warm file 1.4 GB/s;
bench/README.md, "Copy + piece verification"): with
``pieces`` every byte already goes through SHA-1, and a second hash of every byte in the same
pass costs CPU the copy needs (the pieces copy is CPU-bound on 2 cores when the source is in
the page cache). So a ``pieces`` import records **no** extra content hash: the piece hashes,
checked, prove more than a digest nothing compares with. SHA-256 stays the one content hash, for
``verify="sha256"`` (a ``sha256sum`` users can compare); BLAKE3 would be 3x cheaper but a new
dependency, and a digest no common tool prints.
"""

from umt.media.importing.failures import (
    CrossDevice,
    DestinationExists,
    ImportFailure,
    ImportPermissionError,
    LibraryRootMissing,
    NoSpace,
    SourceChanged,
    UnsafePath,
)
from umt.media.importing.imports import holds_import, import_file
from umt.media.importing.links import probe_hardlink
from umt.media.importing.paths import (
    ensure_dir_inside,
    partial_path,
    remove_empty_dirs,
    remove_stray_partial,
    resolve_inside,
)
from umt.media.importing.permissions import (
    NO_PERMISSIONS,
    Permissions,
    readable_by_group,
    unreadable_by_group,
)
from umt.media.importing.pieces import FilePieces, PieceMismatch, check_file_pieces
from umt.media.importing.publish import publish_no_replace
from umt.media.importing.words import (
    DEFAULT_CHUNK_SIZE,
    BeforeRename,
    CheckFn,
    ImportMethod,
    ImportMode,
    ImportResult,
    ProgressFn,
    VerifyMode,
)

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "NO_PERMISSIONS",
    "BeforeRename",
    "CheckFn",
    "CrossDevice",
    "DestinationExists",
    "FilePieces",
    "ImportFailure",
    "ImportMethod",
    "ImportMode",
    "ImportPermissionError",
    "ImportResult",
    "LibraryRootMissing",
    "NoSpace",
    "Permissions",
    "PieceMismatch",
    "ProgressFn",
    "SourceChanged",
    "UnsafePath",
    "VerifyMode",
    "check_file_pieces",
    "ensure_dir_inside",
    "holds_import",
    "import_file",
    "partial_path",
    "probe_hardlink",
    "publish_no_replace",
    "readable_by_group",
    "remove_empty_dirs",
    "remove_stray_partial",
    "resolve_inside",
    "unreadable_by_group",
]
