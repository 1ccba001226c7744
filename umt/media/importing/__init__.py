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

A copy is written to a deterministic temporary name beside the destination (see
:func:`partial_path`), fsynced, checked, and published under the final name **without ever
replacing a file there** (``renameat2(RENAME_NOREPLACE)``, or on filesystems that cannot do that,
a hard link, which fails on an existing name just as atomically, then the temporary name goes);
then the folder is fsynced. The final name therefore only ever holds a complete file, and never
one that replaced another; a crash leaves at most the temporary file, which the next attempt
removes before starting again.

Each result names the published file's identity (device, inode, modification time): a later
attempt, or a compensation, recognises its own import by that identity, never by an equal size.

What "verify" means here: the SHA-256 is computed from the very bytes read from the source and
handed to ``write()``, so no second read of either file is needed. Every write is checked for
completeness, and after ``fsync`` the destination's size must equal the number of bytes read and
the source's size at the start; the source's size and mtime must not have changed during the
copy. This catches short and failed writes, a full disk and a source modified while it was being
copied. It does not catch corruption below the page cache (disk, controller, network
filesystem): only re-reading the destination does, which :func:`holds_import` does for an import
recorded without its identity. ``verify="size"`` skips the hash.
Hardlinks and reflinks share the source's data blocks, so no bytes pass through umt and their
``sha256`` is ``None``.
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
    "ImportFailure",
    "ImportMethod",
    "ImportMode",
    "ImportPermissionError",
    "ImportResult",
    "LibraryRootMissing",
    "NoSpace",
    "Permissions",
    "ProgressFn",
    "SourceChanged",
    "UnsafePath",
    "VerifyMode",
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
