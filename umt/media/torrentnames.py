"""The names umt gives a torrent outside its run: its done signal and its ledger operations.

Apart from the steps and the request that use them, so that the finish hook, which runs for
every torrent qBittorrent finishes, reads them without loading the qBittorrent client.
"""

from __future__ import annotations

DONE_SIGNAL_PREFIX = "download-done:"


def done_signal_name(info_hash: str) -> str:
    """The signal qBittorrent's finish hook (or a reconcile pass) sends for a torrent."""
    return f"{DONE_SIGNAL_PREFIX}{info_hash.lower()}"


def add_operation(info_hash: str) -> str:
    return f"qbt-add:{info_hash}"


def delete_operation(info_hash: str) -> str:
    return f"qbt-delete:{info_hash}"
