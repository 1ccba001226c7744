"""The access token of ``umt web`` when it listens beyond loopback: made on first use, kept
with mode 0600 in the user's config dir."""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

TOKEN_FILE_NAME = "web-token"


def default_token_path() -> Path:
    from platformdirs import user_config_path

    return user_config_path("umt") / TOKEN_FILE_NAME


def load_or_create_token(path: Path) -> tuple[str, bool]:
    """The token stored at ``path`` (created if missing) and whether it was just created.

    A token file that others may read is refused: whoever reads it controls the dashboard.
    """
    try:
        return _read(path), False
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    token = secrets.token_urlsafe(32)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another `umt web` made it first
        return _read(path), False
    with os.fdopen(descriptor, "w") as handle:
        handle.write(token + "\n")
    return token, True


def _read(path: Path) -> str:
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise PermissionError(
            f"{path} is readable by others (mode {stat.S_IMODE(mode):o}); "
            f"run 'chmod 600 {path}' or delete it to get a new token"
        )
    token = path.read_text().strip()
    if len(token) < 32:
        raise PermissionError(f"{path} holds no usable token; delete it to get a new one")
    return token
