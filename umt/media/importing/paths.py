"""Where imports write: folders inside the library, and each writer's temporary name."""

from __future__ import annotations

import errno
import hashlib
import os
import re
from pathlib import Path

from umt.media.importing.failures import (
    ImportFailure,
    LibraryRootMissing,
    UnsafePath,
    translated_os_errors,
)
from umt.media.importing.permissions import NO_PERMISSIONS, Permissions

PARTIAL_SUFFIX = ".umt-partial"
_NAME_MAX = 255
_OWNER = re.compile(r"[a-z][0-9]+")
_PARTIAL_ROOM = 40
_DIR_FSYNC_UNSUPPORTED = frozenset({errno.EINVAL, errno.EOPNOTSUPP})


def partial_path(dest: Path, owner: str = "") -> Path:
    """The temporary name of ``dest`` while ``owner`` writes it: ``.<name>.<owner>.umt-partial``.

    Each writer (the workflow passes its lease epoch) has a name of its own, so a worker that
    lost the run and wakes up cleans up only its own file, never the new owner's. Too long a
    name is shortened with a digest of the full name, so it stays deterministic.
    """
    if owner and not _OWNER.fullmatch(owner):
        raise ValueError(f"owner {owner!r} must be a letter and digits, like 'e12'")
    infix = f".{owner}" if owner else ""
    return dest.with_name(f"{_partial_stem(dest)}{infix}{PARTIAL_SUFFIX}")


def _partial_stem(dest: Path) -> str:
    stem = f".{dest.name}"
    if len(os.fsencode(stem)) <= _NAME_MAX - _PARTIAL_ROOM:
        return stem
    digest = hashlib.sha256(os.fsencode(dest.name)).hexdigest()[:16]
    room = _NAME_MAX - _PARTIAL_ROOM - len(f".-{digest}")
    head = os.fsencode(dest.name)[:room].decode("utf-8", "ignore")
    return f".{head}-{digest}"


def remove_stray_partial(dest: Path, owner: str | None = None) -> bool:
    """Remove temporary files interrupted imports of ``dest`` left behind; True if any.

    With ``owner``, only that writer's file; without, every writer's (call it only while
    holding the run, e.g. right after a fenced ledger write).
    """
    if owner is not None:
        return remove_if_present(partial_path(dest, owner))
    pattern = re.compile(
        re.escape(_partial_stem(dest)) + rf"(\.{_OWNER.pattern})?" + re.escape(PARTIAL_SUFFIX)
    )
    removed = False
    try:
        names = os.listdir(dest.parent)
    except FileNotFoundError:
        return False
    for name in names:
        if pattern.fullmatch(name):
            removed = remove_if_present(dest.parent / name) or removed
    return removed


def resolve_inside(path: Path, root: Path) -> Path:
    """Return the real path of ``path``, refusing one that resolves outside ``root``.

    Symlinks in the existing part of ``path`` are resolved; the part that does not exist yet is
    taken literally.
    """
    real_root = Path(os.path.realpath(root))
    real = Path(os.path.realpath(path))
    if real != real_root and real_root not in real.parents:
        raise UnsafePath(f"{path} resolves to {real}, outside {real_root}")
    return real


def ensure_dir_inside(
    path: Path, library_root: Path, permissions: Permissions = NO_PERMISSIONS
) -> list[Path]:
    """Create the folder ``path`` inside ``library_root``; return the folders created, top first,
    each given ``permissions`` as it is made.

    The library root itself must already exist: a missing root usually means an unmounted disk,
    and creating it would fill the filesystem underneath the mount point.
    """
    root = Path(os.path.abspath(library_root))
    if not root.is_dir():
        raise LibraryRootMissing(f"library folder {root} does not exist (is its disk mounted?)")
    real_root = Path(os.path.realpath(root))
    relative = resolve_inside(Path(os.path.abspath(path)), root).relative_to(real_root)
    created: list[Path] = []
    with translated_os_errors(path):
        current = root
        for part in relative.parts:
            current = current / part
            if make_dir(current):
                created.append(current)
                resolve_inside(current, root)
                permissions.apply_to_dir(current)
                fsync_dir(current.parent)
            elif not current.is_dir():
                raise ImportFailure(f"{current} exists and is not a folder")
    return created


def remove_empty_dirs(folders: list[Path]) -> list[Path]:
    """Remove those of ``folders`` that are empty, deepest first; return the ones removed.

    Meant for the folders :func:`ensure_dir_inside` created, when an import is abandoned.
    """
    removed: list[Path] = []
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        try:
            folder.rmdir()
        except FileNotFoundError:
            continue
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                continue
            raise
        removed.append(folder)
    return removed


def make_dir(path: Path) -> bool:
    try:
        os.mkdir(path)
    except FileExistsError:
        return False
    return True


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in _DIR_FSYNC_UNSUPPORTED:
            raise
    finally:
        os.close(fd)


def remove_if_present(path: Path) -> bool:
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True
