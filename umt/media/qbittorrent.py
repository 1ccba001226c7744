"""umt's adapter to qBittorrent's Web API (qbittorrent-api underneath).

Every call goes through ``QbtClient._call``: it logs in once, retries while qBittorrent is
unreachable, and translates qbittorrent-api / requests exceptions into ``QbtAdapterError``s.
Works with qBittorrent 4.x and 5.x spellings of states.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar

from pydantic import SecretStr

from umt.media.pathmap import PathMap
from umt.media.sources import TorrentSource
from umt.textsafe import redact_url

log = logging.getLogger(__name__)

T = TypeVar("T")

# 5.0 renamed pausedUP/pausedDL to stoppedUP/stoppedDL
COMPLETED_STATES = frozenset(
    {"uploading", "stalledUP", "pausedUP", "stoppedUP", "queuedUP", "forcedUP"}
)
ERRORED_STATES = frozenset({"error", "missingFiles"})
CHECKING_STATES = frozenset({"checkingUP", "checkingDL", "checkingResumeData"})
#: How umt names an errored state when it fails a run for it.
ERROR_REASONS = {
    "missingFiles": "missing files",
    "error": "error (see qBittorrent's log: a full disk, a moved or unreadable folder)",
}


class QbtAdapterError(Exception):
    """Base of every error the adapter raises."""

    exit_code = 1  # the world failed, as the command line reports it


class QbtUnavailable(QbtAdapterError):
    """qBittorrent did not answer (refused, reset or timed out), even after retries."""


class QbtAuthFailed(QbtAdapterError):
    """qBittorrent rejected the credentials (or banned this address after failed logins)."""


class QbtError(QbtAdapterError):
    """qBittorrent answered with an error."""


class QbtNotFound(QbtError):
    """qBittorrent does not know the torrent."""


@dataclass(frozen=True)
class TorrentInfo:
    info_hash: str  # v1 info-hash, lowercase hex
    torrent_id: str  # the API's "hash" (differs from info_hash only for hybrid v1+v2 torrents)
    name: str
    state: str
    progress: float
    size: int
    completed: int  # bytes of the selected files downloaded and checked
    save_path: str
    content_path: str
    category: str
    tags: tuple[str, ...]

    @property
    def is_complete(self) -> bool:
        return self.progress >= 1 and self.state in COMPLETED_STATES

    @property
    def is_errored(self) -> bool:
        return self.state in ERRORED_STATES

    @property
    def problem(self) -> str | None:
        """Why this torrent cannot finish as it is (None: nothing wrong)."""
        if not self.is_errored:
            return None
        return f"qBittorrent: {ERROR_REASONS.get(self.state, self.state)}"

    @property
    def is_checking(self) -> bool:
        return self.state in CHECKING_STATES

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> TorrentInfo:
        torrent_id = str(data["hash"]).lower()
        return cls(
            info_hash=str(data.get("infohash_v1") or torrent_id).lower(),
            torrent_id=torrent_id,
            name=str(data.get("name", "")),
            state=str(data.get("state", "")),
            progress=float(data.get("progress", 0.0)),
            size=int(data.get("size", 0)),
            completed=int(data.get("completed", 0)),
            save_path=str(data.get("save_path", "")),
            content_path=str(data.get("content_path", "")),
            category=str(data.get("category", "")),
            tags=_split_tags(data.get("tags", "")),
        )


@dataclass(frozen=True)
class TorrentFile:
    index: int
    path: str  # relative to the save path, with "/" separators
    size: int
    progress: float
    priority: int
    #: The first and last piece the file touches, as qBittorrent reports them.
    piece_range: tuple[int, int] | None = None

    @classmethod
    def from_api(cls, data: Mapping[str, Any], position: int) -> TorrentFile:
        pieces = data.get("piece_range")
        return cls(
            index=int(data.get("index", position)),
            path=str(data["name"]),
            size=int(data["size"]),
            progress=float(data.get("progress", 0.0)),
            priority=int(data.get("priority", 1)),
            piece_range=(int(pieces[0]), int(pieces[1]))
            if isinstance(pieces, list | tuple) and len(pieces) == 2 else None,
        )


@dataclass(frozen=True)
class AddOutcome:
    status: Literal["added", "adopted"]
    torrent: TorrentInfo

    @property
    def adopted(self) -> bool:
        return self.status == "adopted"


def _split_tags(tags: object) -> tuple[str, ...]:
    if isinstance(tags, str):
        return tuple(t.strip() for t in tags.split(",") if t.strip())
    if isinstance(tags, Iterable):
        return tuple(str(t) for t in tags)
    return ()


class QbtClient:
    """A qBittorrent Web API client for umt.

    ``password`` is kept as a ``SecretStr``: it never appears in ``repr``, logs or errors.
    A call is tried ``attempts`` times, sleeping ``backoff``, 2x, 4x... seconds between tries,
    while qBittorrent is unreachable: a stopped instance is reported after about 3.5 s with
    the defaults, a hung one only after several ``timeout``s (qbittorrent-api and urllib3
    retry each request once more on their own).
    """

    def __init__(
        self,
        url: str,
        username: str,
        password: str | SecretStr,
        *,
        timeout: float = 10.0,
        attempts: int = 4,
        backoff: float = 0.5,
        add_confirm_timeout: float = 10.0,
        sleep: Callable[[float], None] = time.sleep,
        path_map: PathMap | None = None,
    ) -> None:
        #: Where, for messages: never with a password or query values.
        self.url = redact_url(url)
        self.username = username
        self._password = password if isinstance(password, SecretStr) else SecretStr(password)
        self._attempts = max(1, attempts)
        self._backoff = backoff
        self._add_confirm_timeout = add_confirm_timeout
        self._sleep = sleep
        self._logged_in = False
        #: Every path read from qBittorrent goes through it (save paths sent are qBittorrent's
        #: already: see ``App.acquire_request``).
        self.path_map = path_map or PathMap()
        import qbittorrentapi  # imported on use: it costs every command-line start ~0.1 s

        self._api = qbittorrentapi.Client(
            host=url,
            username=username,
            password=self._password.get_secret_value(),
            REQUESTS_ARGS={"timeout": timeout},
            DISABLE_LOGGING_DEBUG_OUTPUT=True,
        )

    def __repr__(self) -> str:
        return f"QbtClient(url={self.url!r}, username={self.username!r}, password='**********')"

    # --- plumbing --------------------------------------------------------------------------

    def _call(self, what: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        # Retrying is safe: every call is a read, idempotent, or (add) deduplicated by hash.
        import qbittorrentapi
        import requests

        delay = self._backoff
        for attempt in range(1, self._attempts + 1):
            try:
                self._login_once()
                return fn(*args, **kwargs)
            except (qbittorrentapi.APIError, requests.RequestException) as exc:
                error = self._translate(what, exc)
                if not isinstance(error, QbtUnavailable) or attempt == self._attempts:
                    raise error from exc
                log.warning("%s (attempt %d of %d)", error, attempt, self._attempts)
            self._sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")

    def _login_once(self) -> None:
        # qbittorrent-api logs in lazily (and again on a 403); logging in up front makes a
        # bad password an explicit QbtAuthFailed instead of a failure of some later call.
        if not self._logged_in:
            self._api.auth_log_in()
            self._logged_in = True

    def _translate(self, what: str, exc: Exception) -> QbtAdapterError:
        """The one place that maps qbittorrent-api and requests exceptions."""
        import qbittorrentapi
        import requests

        where = f"qBittorrent at {self.url}"
        if isinstance(exc, qbittorrentapi.LoginFailed):
            return QbtAuthFailed(f"{where} rejected the login of user {self.username!r}")
        if isinstance(exc, qbittorrentapi.HTTP401Error | qbittorrentapi.HTTP403Error):
            return QbtAuthFailed(
                f"{where} refused access to {what} (HTTP {exc.http_status_code}): wrong "
                f"credentials for user {self.username!r}, or this address is banned after "
                "failed logins"
            )
        if isinstance(exc, qbittorrentapi.HTTP404Error):
            return QbtNotFound(f"{what}: {where} does not know this torrent")
        if isinstance(exc, qbittorrentapi.HTTPError):
            status = getattr(exc, "http_status_code", "?")
            return QbtError(f"{what}: {where} answered HTTP {status}: {exc}".rstrip(": "))
        if isinstance(exc, qbittorrentapi.APIConnectionError | requests.RequestException):
            return QbtUnavailable(f"{where} is unreachable during {what} ({_reason(exc)})")
        return QbtError(f"{what}: {where} failed: {exc}")

    # --- application -----------------------------------------------------------------------

    def login(self) -> None:
        """Check the credentials now (raises QbtAuthFailed / QbtUnavailable)."""
        self._logged_in = False
        self._call("login", lambda: None)

    def version(self) -> str:
        """The application version, e.g. ``v4.5.2``."""
        return str(self._call("version", self._api.app_version))

    def api_version(self) -> str:
        """The Web API version, e.g. ``2.8.19``."""
        return str(self._call("api version", self._api.app_web_api_version))

    def preferences(self) -> dict[str, Any]:
        return dict(self._call("read preferences", self._api.app_preferences))

    def set_preferences(self, preferences: Mapping[str, Any]) -> None:
        self._call("set preferences", self._api.app_set_preferences, prefs=dict(preferences))

    def set_finish_hook(self, program: str | None) -> None:
        """Run ``program`` when a torrent finishes; ``None`` disables the hook.

        qBittorrent starts it without a shell: the string is split into arguments and
        placeholders such as ``%I`` (v1 info-hash) are substituted.
        """
        self.set_preferences(
            {"autorun_enabled": program is not None, "autorun_program": program or ""}
        )

    def finish_hook(self) -> str | None:
        preferences = self.preferences()
        if not preferences.get("autorun_enabled"):
            return None
        return str(preferences.get("autorun_program") or "") or None

    # --- torrents --------------------------------------------------------------------------

    def find(self, info_hash: str) -> TorrentInfo | None:
        """The torrent with this v1 info-hash, or None."""
        info_hash = info_hash.lower()
        found = self._call("find torrent", self._api.torrents_info, torrent_hashes=info_hash)
        if found:
            return self._torrent(found[0])
        # a hybrid (v1+v2) torrent's API hash is its truncated v2 hash
        for data in self._call("list torrents", self._api.torrents_info):
            if str(data.get("infohash_v1", "")).lower() == info_hash:
                return self._torrent(data)
        return None

    def _torrent(self, data: Mapping[str, Any]) -> TorrentInfo:
        """A torrent as qBittorrent describes it, with its paths as umt sees them."""
        info = TorrentInfo.from_api(data)
        if not self.path_map:
            return info
        return replace(info, save_path=self.path_map.to_local(info.save_path),
                       content_path=self.path_map.to_local(info.content_path))

    def save_paths(self) -> dict[str, str]:
        """qBittorrent's default save path ("") and each category's, as qBittorrent sees them
        (categories without a save path of their own are left out)."""
        paths = {"": str(self.preferences().get("save_path") or "")}
        categories = self._call("list categories", self._api.torrents_categories)
        for name, category in dict(categories).items():
            path = str(category.get("savePath") or "") if isinstance(category, Mapping) else ""
            if path:
                paths[str(name)] = path
        return paths

    def find_by_tag(self, tag: str) -> list[TorrentInfo]:
        found = self._call("find torrents by tag", self._api.torrents_info, tag=tag)
        return [self._torrent(data) for data in found]

    def add(
        self,
        source: TorrentSource,
        *,
        category: str,
        tags: list[str],
        save_path: str | None = None,
    ) -> AddOutcome:
        """Add ``source`` unless a torrent with its info-hash exists (then adopt it and tag it)."""
        existing = self.find(source.info_hash)
        if existing is not None:
            return self._adopt(existing, tags)
        self.ensure_category(category)
        answer = self._call(
            "add torrent",
            self._api.torrents_add,
            urls=source.magnet if source.kind == "magnet" else None,
            torrent_files=source.torrent_bytes if source.kind == "torrent" else None,
            category=category,
            tags=tags,
            save_path=save_path,
            use_auto_torrent_management=False if save_path else None,
        )
        torrent = self._await_torrent(source.info_hash)
        if torrent is None:
            raise QbtError(
                f"qBittorrent at {self.url} did not add torrent {source.info_hash} "
                f"(it answered {answer!r})"
            )
        if str(answer).strip() == "Fails.":
            # someone added the same torrent between our find() and add()
            return self._adopt(torrent, tags)
        return AddOutcome("added", torrent)

    def _adopt(self, torrent: TorrentInfo, tags: list[str]) -> AddOutcome:
        missing = [t for t in tags if t not in torrent.tags]
        if missing:
            self._call(
                "tag torrent",
                self._api.torrents_add_tags,
                tags=missing,
                torrent_hashes=torrent.torrent_id,
            )
            torrent = self.find(torrent.info_hash) or torrent
        return AddOutcome("adopted", torrent)

    def _await_torrent(self, info_hash: str) -> TorrentInfo | None:
        # 4.x answers only "Ok."/"Fails." and registers the torrent asynchronously
        deadline = time.monotonic() + self._add_confirm_timeout
        while True:
            torrent = self.find(info_hash)
            if torrent is not None or time.monotonic() > deadline:
                return torrent
            self._sleep(0.1)

    def ensure_category(self, category: str) -> None:
        if not category or category in self._call("list categories", self._api.torrents_categories):
            return
        try:
            self._call("create category", self._api.torrents_create_category, name=category)
        except QbtError:
            # 409 when it was created meanwhile
            if category not in self._call("list categories", self._api.torrents_categories):
                raise

    def delete(self, info_hash: str, *, delete_files: bool) -> bool:
        """Remove the torrent (and its data); False if it was already gone."""
        torrent = self.find(info_hash)
        if torrent is None:
            return False
        self._call(
            "delete torrent",
            self._api.torrents_delete,
            delete_files=delete_files,
            torrent_hashes=torrent.torrent_id,
        )
        return True

    def files(self, info_hash: str) -> list[TorrentFile]:
        torrent = self.find(info_hash)
        if torrent is None:
            raise QbtNotFound(f"qBittorrent at {self.url} has no torrent {info_hash}")
        found = self._call("list files", self._api.torrents_files, torrent_hash=torrent.torrent_id)
        return [TorrentFile.from_api(data, i) for i, data in enumerate(found)]

    def piece_hashes(self, torrent: TorrentInfo) -> list[str]:
        """The torrent's v1 piece hashes (SHA-1, hex), in piece order; empty when qBittorrent
        has none (no metadata yet, or a v2-only torrent)."""
        found = self._call("read piece hashes", self._api.torrents_piece_hashes,
                           torrent_hash=torrent.torrent_id)
        return [str(digest) for digest in found]

    def piece_size(self, torrent: TorrentInfo) -> int:
        properties = self._call("read torrent properties", self._api.torrents_properties,
                                torrent_hash=torrent.torrent_id)
        return int(str(properties.get("piece_size") or 0))

    def add_peers(self, info_hash: str, peers: list[str]) -> None:
        """Tell qBittorrent about peers (``host:port``) for a torrent."""
        torrent = self.find(info_hash)
        if torrent is None:
            raise QbtNotFound(f"qBittorrent at {self.url} has no torrent {info_hash}")
        self._call(
            "add peers",
            self._api.torrents_add_peers,
            peers=peers,
            torrent_hashes=torrent.torrent_id,
        )


def _reason(exc: BaseException) -> str:
    import requests

    # qbittorrent-api re-raises connection problems as APIConnectionError inside its handler
    cause = exc.__context__ if isinstance(exc.__context__, requests.RequestException) else exc
    if isinstance(cause, requests.Timeout):
        return "timed out"
    if isinstance(cause, requests.ConnectionError):
        return "connection refused or reset"
    return type(cause).__name__
