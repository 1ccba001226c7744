"""The composition root: turns settings into an engine, a qBittorrent client and workflows.

Everything that needs more than one layer (the CLI, the finish hook, the demo, the spikes)
builds its objects here, so the layers themselves stay ignorant of each other.
"""

from __future__ import annotations

from datetime import timedelta
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from umt.config import Settings
    from umt.engine import Engine, Registry, StartResult, WorkerOptions, Workflow
    from umt.media.mediaservers import MediaServer
    from umt.media.pathmap import PathMap
    from umt.media.qbittorrent import QbtClient
    from umt.media.request import AcquireRequest
    from umt.media.sources import TorrentSource
    from umt.media.verification import FileCheck


class App:
    def __init__(self, settings: Settings, *, pool_size: int | None = None) -> None:
        self.settings = settings
        self._pool_size = pool_size or pool_size_for(settings.engine.concurrency)
        self._engine: Engine | None = None

    # ------------------------------------------------------------------ database

    @property
    def schemas(self) -> tuple[str, str]:
        return database_schemas(self.settings.engine.db_schema)

    def engine(self, *, migrate_embedded: bool = True, check_schema: bool = True) -> Engine:
        """The engine on the configured database.

        The embedded SQLite database is created and migrated on first use; PostgreSQL is only
        migrated by ``umt db migrate`` and refused until then.
        """
        if self._engine is not None:
            return self._engine
        engine = open_engine(
            self.settings.database_url(), self.settings.engine.db_schema,
            pool_size=self._pool_size,
            sqlite_poll_interval=self.settings.engine.sqlite_poll_interval,
            lease=self.settings.engine.lease, signal_ttl=self.settings.engine.signal_ttl,
            migrate_embedded=migrate_embedded, check_schema=check_schema,
        )
        self._engine = engine
        return engine

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None

    # ------------------------------------------------------------------ qBittorrent

    def qbittorrent(self) -> QbtClient:
        from umt.media.qbittorrent import QbtClient

        section = self.settings.qbittorrent
        password = section.password.get_secret_value() if section.password else ""
        return QbtClient(section.url, section.username, password,
                         timeout=section.timeout.total_seconds(), path_map=self.path_map())

    def path_map(self) -> PathMap:
        from umt.media.pathmap import PathMap

        return PathMap.of((m.remote, m.local) for m in self.settings.qbittorrent.path_map)

    # ------------------------------------------------------------------ workflows

    @cached_property
    def acquire_workflow(self) -> Workflow:
        """The version new runs start with."""
        from umt.media.acquire import WORKFLOW_VERSION

        return self.acquire_workflows[WORKFLOW_VERSION]

    @cached_property
    def acquire_workflows(self) -> dict[str, Workflow]:
        """Every version a worker runs (runs started before an upgrade finish as they began)."""
        from umt.media.acquire import WORKFLOW_VERSIONS, build_acquire_workflow
        from umt.media.announce import retry_policy
        from umt.media.notifier import targets
        from umt.media.services import AcquireServices, LazyServices

        notify = self.settings.notify
        services = LazyServices(lambda: AcquireServices(
            self.qbittorrent(), media_servers=self.media_servers(),
            notify_targets=targets([url.get_secret_value() for url in notify.urls]),
        ))
        retry = retry_policy(notify.attempts, notify.retry_interval)
        return {version: build_acquire_workflow(services, retry, version)
                for version in WORKFLOW_VERSIONS}

    def media_servers(self) -> tuple[MediaServer, ...]:
        from umt.media.mediaservers import MediaServer

        return tuple(
            MediaServer(server.kind, server.label, server.url, server.token.get_secret_value(),
                        library_path=server.library_path,
                        library_dir=str(self.settings.library.dir))
            for server in self.settings.media_servers
        )

    def registry(self) -> Registry:
        from umt.engine import Registry

        return Registry(list(self.acquire_workflows.values()))

    def worker_options(self, concurrency: int | None = None) -> WorkerOptions:
        from umt.engine import WorkerOptions

        engine = self.settings.engine
        return WorkerOptions(
            concurrency=concurrency or engine.concurrency, lease=engine.lease,
            poll_interval=engine.poll_interval,
        )

    def start_acquire(
        self, source: TorrentSource, *, title: str | None = None,
        retention: timedelta | None = None, idempotency_key: str | None = None,
    ) -> StartResult:
        """Starts (or finds) the acquisition of ``source``. Without a key, the info-hash is the
        key: the same torrent started twice is one run, however its source is spelled (another
        magnet text, trackers, name, or its .torrent file). The key is refused as a conflict
        only when an option that changes what the run does differs."""
        from umt.engine import IdempotencyConflict, StartResult
        from umt.media.request import AcquireRequest

        request = self.acquire_request(source, title=title, retention=retention)
        engine = self.engine()
        try:
            return engine.start(
                self.acquire_workflow, request.model_dump(mode="json"),
                idempotency_key=idempotency_key or source.info_hash,
            )
        except IdempotencyConflict as conflict:
            existing = engine.get(conflict.run_id)
            try:
                same = AcquireRequest.model_validate(existing.input).identity() == (
                    request.identity()
                )
            except ValueError:  # the key is held by a run of another shape
                same = False
            if not same:
                raise
            return StartResult(existing, created=False)

    def verify_imports(self, engine: Engine, run_id: str) -> list[FileCheck]:
        """Checks the files run ``run_id`` imported against its torrent's piece hashes again
        (``umt verify``); raises ``UnknownRun`` or ``NothingImported`` (bad input)."""
        from umt.media.acquire import WORKFLOW_NAME
        from umt.media.verification import NothingImported, verify_run

        run = engine.get(run_id)
        info_hash = run.input.get("info_hash") if isinstance(run.input, dict) else None
        if run.workflow != WORKFLOW_NAME or not isinstance(info_hash, str):
            raise NothingImported(f"run {run_id} is not an acquisition")
        return verify_run(engine.database, self.qbittorrent(), run_id, info_hash)

    def acquire_request(
        self, source: TorrentSource, *, title: str | None = None,
        retention: timedelta | None = None,
    ) -> AcquireRequest:
        from umt.media.request import AcquireRequest

        library = self.settings.library
        file_mode, dir_mode, group_id = library.permissions
        return AcquireRequest(
            source=source.to_json(),
            info_hash=source.info_hash,
            title=title or source.name or source.info_hash,
            title_given=bool(title),
            retention_seconds=(
                retention if retention is not None else self.settings.acquire.retention
            ).total_seconds(),
            download_timeout_seconds=self.settings.acquire.download_timeout.total_seconds(),
            stall_timeout_seconds=(stall.total_seconds() if (
                stall := self.settings.acquire.stall_timeout) else None),
            category=self.settings.qbittorrent.category,
            # as qBittorrent sees it: a worker on another host sends it unchanged
            save_path=(self.path_map().to_remote(download_dir) if (
                download_dir := self.settings.qbittorrent.download_dir) else None),
            library_dir=str(Path(library.dir)),
            import_mode=library.import_mode,
            naming_template=library.naming_template,
            all_files=library.all_files,
            verify=library.verify,
            file_mode=file_mode, dir_mode=dir_mode, group_id=group_id,
        )


def pool_size_for(concurrency: int) -> int:
    """The connection pool of a process that runs ``concurrency`` runs at once: one connection
    per run and three to spare for the worker's own statements (every command sizes it so)."""
    return concurrency + 3


def database_schemas(engine_schema: str) -> tuple[str, str]:
    """The engine's schema and the records' beside it."""
    from umt.records import business_schema

    return engine_schema, business_schema(engine_schema)


def open_engine(url: str, engine_schema: str, *, pool_size: int,
                sqlite_poll_interval: timedelta, lease: timedelta, signal_ttl: timedelta,
                migrate_embedded: bool = True, check_schema: bool = True) -> Engine:
    """The engine on ``url``: the embedded SQLite database is created and migrated on first use
    (``migrate_embedded``); PostgreSQL is only migrated by ``umt db migrate`` and refused until
    then (``check_schema``). Also the finish hook's, which reads its settings without ``App``."""
    from umt.engine import Engine, open_database
    from umt.records import RECORDS_MIGRATIONS

    database = open_database(url, schemas=database_schemas(engine_schema), pool_size=pool_size,
                             sqlite_poll_interval=sqlite_poll_interval.total_seconds(),
                             lease=lease)
    engine = Engine(database, signal_ttl=signal_ttl, migration_sets=[RECORDS_MIGRATIONS])
    try:
        if migrate_embedded and database.dialect == "sqlite":
            engine.migrate()
        elif check_schema:
            engine.require_schema()
    except BaseException:
        engine.close()
        raise
    return engine
