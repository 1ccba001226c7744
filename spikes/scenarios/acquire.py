"""Scenarios that run umt's own acquire workflow: ``umt start-acquire``, ``umt worker``,
``umt signal``, ``umt cancel``, ``umt status``/``show``, every one its own process.

The main path (a) runs against real qbittorrent-nox (a seeder with its embedded tracker and the
client umt drives), with umt's finish hook installed in it. The others use the fake qBittorrent
(``spikes/fake_qbittorrent.py``): there qBittorrent is not the point, and only a fake can inject
"accepted, then the connection dropped". Where a copy must be slow (to be killed, frozen or
canceled in the middle) or stopped right after its rename, the worker is
``python -m spikes.umt_cli worker`` with ``SPIKE_FAULTS`` set; the worker that takes over is a
plain ``umt worker``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from spikes.fake_qbittorrent import FakeQbittorrent
from spikes.harness import Case, wait_until
from spikes.scenarios import (
    PG_ONLY,
    attempts_block,
    info_hash,
    library_files,
    magnet,
    migrate,
    scenario,
    sha256_of,
    step_of,
    timestamp,
)

FAKE = "umt CLI and `umt worker`; fake qBittorrent"
FAKE_SLOW = ("umt CLI; fake qBittorrent; the first worker runs with a slow disk "
             "(`spikes.umt_cli`, SPIKE_FAULTS=slow-copy=16 MB/s), the next is a plain `umt worker`")
MAIN_STEPS = ["submit-download", "wait-download", "confirm-download", "copy-file", "register",
              "notify-library", "notify-imported", "retention", "cleanup"]


def _start(case: Case, hash_hex: str, name: str, *extra: str) -> str:
    result = case.umt("start-acquire", magnet(hash_hex, name), *extra)
    if result.code != 0 or not result.json:
        raise RuntimeError(f"start-acquire failed: {result.stderr.strip()}")
    return str(result.json["run_id"])


def _signaled_acquisition(case: Case, label: str, name: str,
                          size: int) -> tuple[FakeQbittorrent, str, str]:
    """(fake, hash, run id): a torrent prepared in the fake qBittorrent, its done signal sent
    ahead, and its acquisition started."""
    fake = case.fake_qbittorrent()
    hash_hex = info_hash(f"{label}-{case.backend}")
    fake.prepare(hash_hex, name, size)
    case.umt("signal", f"download-done:{hash_hex}")
    return fake, hash_hex, _start(case, hash_hex, name)


def _partials(case: Case) -> list[Path]:
    return sorted(p for p in case.library.rglob("*.umt-partial"))


# ---------------------------------------------------------------------- (a) main path


@scenario("a", "Tables and migrations; the main path end to end",
          setup="umt CLI and `umt worker`; real qbittorrent-nox (seeder + the client umt "
                "drives), umt's finish hook installed in it")
def main_path(case: Case) -> None:
    case.section.summary = (
        "`umt db migrate` twice, `umt tables`; then a real acquisition: a seeder qBittorrent "
        "seeds a generated 8 MiB film, umt adds its .torrent to the other qBittorrent, whose "
        "finish hook (`umt qbittorrent install-hook`) sends `download-done:<hash>`; the worker "
        "imports, registers, keeps seeding for 2 s and cleans up.")
    from tests.support.qbittorrent import make_payload

    swarm, leecher = case.spikes.real_qbittorrent()
    case.configure(qbittorrent=(leecher.url, leecher.username, leecher.password,
                                leecher.download_dir), import_mode="auto", poll="1s")
    first = case.umt("db", "migrate")
    second = case.umt("db", "migrate")
    status = case.umt("db", "status")
    tables = case.umt("tables")
    seed_dir = case.dir / "seed"
    payload_hash = make_payload(seed_dir, "Spike Film (2026).mkv", 8 << 20,
                                seed=sum(map(ord, case.backend)))
    seeded = swarm.seed(seed_dir / "Spike Film (2026).mkv")
    torrent_file = case.dir / "spike-film.torrent"
    torrent_file.write_bytes(seeded.torrent_bytes)
    hook = case.umt("qbittorrent", "install-hook")
    started = case.umt("start-acquire", str(torrent_file), "--name", "Spike Film",
                       "--retention", "2s")
    run_id = str((started.json or {}).get("run_id"))
    case.worker("A")
    case.wait_run(run_id, lambda r: r.status != "pending", 30)
    case.umt("status", run_id)
    run = case.settled(run_id, 90)
    final = case.umt("status", run_id)
    show = case.umt("show", run_id, show=False).json or {}
    attempts_block(case, show)
    ledger = case.ledger(run_id)
    case.ledger_block(ledger)
    catalog = case.umt("catalog")
    signals = case.sql(f"SELECT name, data, status FROM {case.table('signals')}")
    files = library_files(case)
    leftover = leecher.client().torrents_info(torrent_hashes=seeded.info_hash)
    case.section.block([
        f"library: {[case.shorten(str(p)) for p in files]}",
        f"sha256 of the library file: {sha256_of(files[0]) if files else '-'}",
        f"sha256 of the seeded file:  {payload_hash}",
        f"signals: {[(s['name'][:22] + '…', s['data'], s['status']) for s in signals]}",
        f"torrent still in the client qBittorrent after cleanup: {bool(leftover)}",
    ])
    check = case.section.check
    applied = (first.json or {}).get("applied") or []
    check(first.code == 0 and len(applied) >= 2 and second.code == 0
          and (second.json or {}).get("applied") == [],
          f"migrate applied {len(applied)} migrations, then none (idempotent)")
    check(status.code == 0 and (status.json or {}).get("current") is True,
          "db status: schema current")
    names = (tables.json or {}).get("tables") or []
    expected = ({"umt.runs", "umt.steps", "umt.attempts", "umt.signals", "umt.workers",
                 "umt_media.ledger", "umt_media.catalog"} if case.pg else
                {"main.runs", "main.steps", "main.attempts", "main.signals", "main.workers",
                 "main.ledger", "main.catalog"})
    check(expected <= set(names), "umt tables lists the engine and business tables")
    check(hook.code == 0 and (hook.json or {}).get("installed") is True,
          "the finish hook is installed in qBittorrent")
    check(run.status == "succeeded" and final.code == 0, f"the run succeeded ({run.status})")
    main = [s for s in show.get("steps", []) if s["phase"] == "main"]
    check([s["name"] for s in main] == MAIN_STEPS
          and all(s["status"] == "succeeded" and len(s["attempts"]) == (
              0 if s["kind"] != "step" else 1) for s in main),
          "every step once, in order: " + " → ".join(s["name"] for s in main))
    check(any(s["name"] == f"download-done:{seeded.info_hash}"
              and (s["data"] or {}).get("source") == "hook" for s in signals),
          "qBittorrent's finish hook sent the done signal")
    check(len(files) == 1 and sha256_of(files[0]) == payload_hash,
          "the library holds the film, byte for byte")
    items = catalog.json or []
    check(len(items) == 1 and items[0].get("run_id") == run_id, "one catalog entry for the run")
    operations = [(r["operation"].split(":")[0], r["phase"]) for r in ledger]
    check(all(op in operations for op in (("qbt-add", "intent"), ("qbt-add", "done"),
                                          ("copy", "intent"), ("copy", "done"),
                                          ("catalog", "done"), ("qbt-delete", "done"))),
          "the ledger records the add, the import, the catalog entry and the removal")
    check(not leftover, "cleanup removed the torrent from qBittorrent")


# ---------------------------------------------------------------------- (b) kill -9


@scenario("b-kill", "kill -9 mid-copy and restart: completed steps not re-run; takeover time",
          setup=FAKE_SLOW)
def kill_mid_copy(case: Case) -> None:
    case.section.summary = (
        "Worker A copies a 64 MiB film into the library (16 MB/s: a slow disk) when it gets "
        "`kill -9`. A new `umt worker` (A2) is started on the same host. engine.lease is 30 s: "
        "a takeover in seconds means A2 noticed A's process was gone, it did not wait for the "
        "lease.")
    case.configure(lease="30s", poll="1s")
    migrate(case)
    fake, hash_hex, run_id = _signaled_acquisition(case, "kill", "Crash Film", 64 << 20)
    a = case.worker("A", workflows=["acquire"], faults="slow-copy=16")
    partial = wait_until(lambda: [p for p in _partials(case) if p.stat().st_size >= 16 << 20],
                         60, interval=0.05)
    case.umt("status", run_id)
    size_at_kill = partial[0].stat().st_size if partial else 0
    os.killpg(a.pid, signal.SIGKILL)
    killed_at = time.time()
    held = case.run(run_id).lease_expires_at
    lease_left = timestamp(held) - killed_at if held is not None else 0.0
    a.popen.wait(10)
    case.worker("A2")
    case.section.say(f"`kill -9` of A (pid {a.pid}) with {size_at_kill >> 20} MiB of 64 copied; "
                     "A2 started at once.")
    run = case.settled(run_id, 60)
    case.umt("status", run_id)
    show = case.umt("show", run_id, show=False).json or {}
    attempts_block(case, show)
    ledger = case.ledger(run_id)
    case.ledger_block(ledger)
    labels = case.worker_labels()
    copy = step_of(show, "copy-file")
    a2_attempts = [x for x in copy["attempts"] if labels.get(str(x["worker_id"])) == "A2"]
    takeover = timestamp(a2_attempts[0]["started_at"]) - killed_at if a2_attempts else None
    expected = fake.content_sha256(hash_hex)
    files = library_files(case)
    case.section.block([
        f"takeover: A2's copy-file attempt began {takeover:.1f} s after kill -9 "
        "(engine.lease 30 s)" if takeover is not None else "takeover: none",
        f"library: {[case.shorten(str(p)) for p in files]}; partial files left: "
        f"{len(_partials(case))}",
    ])
    check = case.section.check
    check(run.status == "succeeded", f"the run succeeded ({run.status})")
    check(takeover is not None and takeover < lease_left,
          f"same-host takeover before A's lease ran out: after {takeover or 0:.1f} s, A's lease "
          f"had {lease_left:.1f} s left")
    earlier = [step_of(show, name) for name in ("submit-download", "confirm-download")]
    check(all(len(s["attempts"]) == 1 and labels.get(str(s["attempts"][0]["worker_id"])) == "A"
              for s in earlier)
          and len([c for c in fake.calls_to("torrents/add") if "Ok." in str(c.status)]) == 1,
          "completed steps were not re-run: submit-download and confirm-download ran once, by A")
    a_attempts = [x for x in copy["attempts"] if labels.get(str(x["worker_id"])) == "A"]
    check(len(a_attempts) == 1 and a_attempts[0]["status"] == "interrupted",
          "A's interrupted copy is marked as such (" + ", ".join(
              x["status"] for x in a_attempts) + ")")
    check(len(files) == 1 and sha256_of(files[0]) == expected and not _partials(case),
          "the library holds one complete file, no partial one")
    copies = [r for r in ledger if r["operation"].startswith("copy:") and r["phase"] == "done"]
    check(len(copies) == 1, "the import is recorded done once")


# ---------------------------------------------------------------------- (c) early signal


@scenario("c", "Signal before the wait: kept, then delivered", setup=FAKE)
def early_signal(case: Case) -> None:
    case.section.summary = (
        "`umt signal download-done:<hash>` is sent before the acquisition even exists. It must "
        "be kept and received by `wait-download` when the run gets there.")
    case.configure(poll="0.5s")
    migrate(case)
    fake = case.fake_qbittorrent()
    hash_hex = info_hash(f"early-{case.backend}")
    fake.prepare(hash_hex, "Early Film", 2 << 20)
    early = case.umt("signal", f"download-done:{hash_hex}")
    run_id = _start(case, hash_hex, "Early Film")
    case.worker("A")
    run = case.settled(run_id, 15)
    case.umt("status", run_id)
    late = case.umt("signal", f"download-done:{hash_hex}", "--run", run_id)
    signals = case.sql(f"SELECT id, status, delivered_to FROM {case.table('signals')}")
    shown = [(str(s["id"])[:8], s["status"], s["delivered_to"]) for s in signals]
    case.section.block([f"signals table: {shown}"])
    step = case.sql(f"SELECT status, result FROM {case.table('steps')} WHERE run_id = :r "
                    "AND name = 'wait-download'", r=run_id)
    received = step[0]["result"] if step else None  # case.sql decodes JSON columns
    check = case.section.check
    check(early.code == 0 and (early.json or {}).get("kept") is True
          and (early.json or {}).get("delivered_to") == [],
          "the early signal was kept (nobody waited yet), and the sender was told so")
    early_id = (early.json or {}).get("signal_id")
    check(run.status == "succeeded" and isinstance(received, dict)
          and received.get("signal_id") == early_id,
          f"wait-download received that very signal; the run {run.status}")
    check(late.code == 1 and "already succeeded" in late.stderr,
          "a signal aimed at the finished run is refused: " + case.shorten(late.error_line))


# ---------------------------------------------------------------------- (d) cancel


@scenario("d", "Cancel: the in-flight step stops, compensation runs, a later signal is refused",
          setup=FAKE_SLOW.replace("16 MB/s", "8 MB/s"))
def cancel_mid_copy(case: Case) -> None:
    case.section.summary = (
        "`umt cancel` while worker A copies a 64 MiB film at 8 MB/s. The copy checks for a "
        "stop between 8 MiB chunks (1 s apart at this speed): it must stop before its end "
        "(its partial file never complete) and remove its partial file, compensation must "
        "remove the torrent the run added "
        "(and its data), no later step may run, and a signal aimed at the canceled run is "
        "refused.")
    case.configure(poll="0.5s")
    migrate(case)
    fake, hash_hex, run_id = _signaled_acquisition(case, "cancel", "Cancel Film", 64 << 20)
    case.worker("A", workflows=["acquire"], faults="slow-copy=8")
    wait_until(lambda: [p for p in _partials(case) if _size(p) >= 4 << 20], 60, interval=0.05)
    gone_at: list[float] = []
    largest = [0]

    def partials_gone() -> bool:
        partials = _partials(case)
        largest[0] = max([largest[0], *(_size(p) for p in partials)])
        return not partials

    watcher = threading.Thread(target=lambda: gone_at.append(
        time.time() if wait_until(partials_gone, 40, interval=0.02) else 0.0))
    watcher.start()
    cancel = case.umt("cancel", run_id, "--wait", "30s")
    watcher.join()
    gone = bool(gone_at and gone_at[0])
    run = case.settled(run_id, 30)
    late = case.umt("signal", f"download-done:{hash_hex}", "--run", run_id)
    show = case.umt("show", run_id, show=False).json or {}
    attempts_block(case, show)
    case.ledger_block(case.ledger(run_id))
    source = fake.download_dir / "Cancel Film.mkv"
    copy_attempts = step_of(show, "copy-file")["attempts"]
    canceled_at = timestamp(copy_attempts[-1]["finished_at"]) if copy_attempts and copy_attempts[
        -1]["finished_at"] else None
    stopped_after = gone_at[0] - canceled_at if gone and canceled_at else None
    case.section.block([
        f"the copy stopped and its partial file was gone {stopped_after:.2f} s after the "
        "cancel committed" if stopped_after is not None else "the partial file stayed",
        f"the partial file held at most {largest[0] >> 20} MiB of 64",
        f"torrents left in qBittorrent: {len(fake.live_torrents())}; its data on disk: "
        f"{source.exists()}; library files: {len(library_files(case))}",
    ])
    copy = step_of(show, "copy-file")
    later = [step_of(show, n)["status"] for n in ("register", "retention", "cleanup")]
    compensation = [s for s in show.get("steps", []) if s["phase"] == "compensation"]
    check = case.section.check
    check(cancel.code == 0 and (cancel.json or {}).get("status") == "canceled"
          and (cancel.json or {}).get("compensation") == "succeeded",
          "umt cancel --wait: canceled, compensation succeeded")
    check(gone and copy["attempts"] and copy["attempts"][-1]["status"] == "canceled"
          and largest[0] < 64 << 20,
          "the in-flight copy stopped before its end: its attempt is canceled, its partial "
          f"file (at most {largest[0] >> 20} of 64 MiB) was removed")
    check(all(status == "(never started)" for status in later),
          "no later step ran (register, retention, cleanup never started)")
    check([s["name"] for s in compensation] == ["discard-partial-imports",
                                                 "catalog-kept-imports", "remove-torrent",
                                                 "notify-outcome"]
          and all(s["status"] == "succeeded" for s in compensation)
          and not fake.live_torrents() and not source.exists()
          and not library_files(case),
          "compensation removed the torrent the run added and its data; nothing in the library")
    check(run.status == "canceled" and late.code == 1 and "canceled" in late.stderr,
          "a later signal to the run is refused: " + case.shorten(late.error_line))


# ---------------------------------------------------------------------- (f) idempotency


@scenario("f", "Idempotency: same key and input → same run; different input → conflict",
          setup="umt CLI only (no worker)")
def idempotency(case: Case) -> None:
    case.section.summary = (
        "`umt start-acquire` with an explicit `--idempotency-key`, and without one (the "
        "info-hash is the key).")
    case.configure()
    migrate(case)
    film = magnet(info_hash(f"idem-{case.backend}"), "Idem Film")
    other = magnet(info_hash(f"idem-other-{case.backend}"), "Other Film")
    first = case.umt("start-acquire", film, "--idempotency-key", "same-key")
    again = case.umt("start-acquire", film, "--idempotency-key", "same-key")
    conflict = case.umt("start-acquire", other, "--idempotency-key", "same-key")
    default1 = case.umt("start-acquire", film)
    default2 = case.umt("start-acquire", film)
    counts = case.sql(f"SELECT idempotency_key, count(*) AS n FROM {case.table('runs')} "
                      "GROUP BY idempotency_key ORDER BY idempotency_key")
    per_key = [(str(c["idempotency_key"])[:12], c["n"]) for c in counts]
    case.section.block([f"runs per idempotency key: {per_key}"])
    check = case.section.check
    one, two = first.json or {}, again.json or {}
    check(one.get("created") is True and two.get("created") is False
          and one.get("run_id") == two.get("run_id"),
          "same key, same input: the existing run, created=false")
    check(conflict.code == 1 and conflict.json is None and "same-key" in conflict.stderr,
          "same key, different input: refused: " + case.shorten(conflict.error_line))
    d1, d2 = default1.json or {}, default2.json or {}
    check(d1.get("created") is True and d2.get("created") is False
          and d1.get("run_id") == d2.get("run_id") != one.get("run_id"),
          "no key: the info-hash is the key, the same torrent twice is one run")
    check([c["n"] for c in counts] == [1, 1], "one run per key in the database")


# ---------------------------------------------------------------------- open items


@scenario("qbt-drop", "qBittorrent accepted the torrent, then the connection dropped",
          setup=FAKE + " (only a fake can drop the connection after performing the add)")
def dropped_after_add(case: Case) -> None:
    case.section.summary = (
        "The fake qBittorrent performs the first `torrents/add` and closes the connection "
        "without answering. umt must not add the torrent twice, and must still know the "
        "torrent is its own (so that cleanup removes it).")
    case.configure(poll="0.5s")
    migrate(case)
    fake, _, run_id = _signaled_acquisition(case, "drop", "Drop Film", 2 << 20)
    fake.drop_after("torrents/add", times=1)
    case.worker("A")
    run = case.settled(run_id, 30)
    show = case.umt("show", run_id, show=False).json or {}
    attempts_block(case, show)
    ledger = case.ledger(run_id)
    case.ledger_block([r for r in ledger if r["operation"].startswith(("qbt-add", "qbt-delete"))])
    case.section.block(["fake qBittorrent, in order (add, tag, delete):", *(
        "  " + call.line() for call in fake.calls
        if call.endpoint in ("torrents/add", "torrents/addTags", "torrents/delete"))])
    step = case.sql(f"SELECT result FROM {case.table('steps')} WHERE run_id = :r "
                    "AND name = 'submit-download'", r=run_id)
    result = step[0]["result"] if step else {}  # case.sql decodes JSON columns
    adds = fake.calls_to("torrents/add")
    done = [r for r in ledger if r["operation"].startswith("qbt-add") and r["phase"] == "done"]
    check = case.section.check
    check(run.status == "succeeded", f"the run succeeded ({run.status})")
    check(any("connection dropped" in str(c.status) for c in adds)
          and sum(1 for c in adds if "Ok." in str(c.status)) == 1
          and len(fake.torrents) == 1,
          f"the add was performed once; {len(adds)} add requests, the later ones answered "
          "'Fails.' (already there)")
    check(isinstance(result, dict) and result.get("added_by_run") is True and bool(done)
          and _detail(done[-1]).get("present_before") is False,
          "the run knows it added the torrent (present_before=false, from its first intent)")
    check(not fake.live_torrents(), "cleanup removed it")


@scenario("qbt-drop-real", "qBittorrent accepted the torrent, then the connection dropped "
          "(real qbittorrent-nox)", backends=PG_ONLY,
          setup="umt CLI and `umt worker`; real qbittorrent-nox behind a loopback proxy that "
                "forwards the first add and closes the connection without its answer")
def dropped_after_add_real(case: Case) -> None:
    case.section.summary = (
        "The same fault against real qBittorrent: a proxy (`spikes/proxy.py`) forwards umt's "
        "first `torrents/add` to qbittorrent-nox, reads its answer and closes umt's "
        "connection. The download then really happens (seeder and tracker), the finish hook "
        "signals, and cleanup must remove the one torrent umt added.")
    from spikes.proxy import DroppingProxy
    from tests.support.qbittorrent import make_payload

    swarm, leecher = case.spikes.real_qbittorrent()
    proxy = DroppingProxy(leecher.url).start()
    try:
        case.configure(qbittorrent=(proxy.url, leecher.username, leecher.password,
                                    leecher.download_dir), import_mode="auto", poll="1s")
        migrate(case)
        seed_dir = case.dir / "seed"
        payload_hash = make_payload(seed_dir, "Dropped Film.mkv", 4 << 20, seed=7)
        seeded = swarm.seed(seed_dir / "Dropped Film.mkv")
        torrent_file = case.dir / "dropped.torrent"
        torrent_file.write_bytes(seeded.torrent_bytes)
        case.umt("qbittorrent", "install-hook", show=False)
        proxy.drop_after("/api/v2/torrents/add")
        started = case.umt("start-acquire", str(torrent_file), "--retention", "1s")
        run_id = str((started.json or {}).get("run_id"))
        case.worker("A")
        run = case.settled(run_id, 60)
        show = case.umt("show", run_id, show=False).json or {}
        attempts_block(case, show)
        ledger = case.ledger(run_id)
        case.ledger_block([r for r in ledger
                           if r["operation"].startswith(("qbt-add", "qbt-delete"))])
        adds = proxy.requests_to("/api/v2/torrents/add")
        case.section.block(["proxy, every torrents/add:", *("  " + a.line() for a in adds)])
        leftover = leecher.client().torrents_info(torrent_hashes=seeded.info_hash)
        files = library_files(case)
        done = [r for r in ledger if r["operation"].startswith("qbt-add")
                and r["phase"] == "done"]
        check = case.section.check
        check(run.status == "succeeded", f"the run succeeded ({run.status})")
        check(len(adds) >= 2 and adds[0].dropped and adds[0].answer == "Ok."
              and all(not a.dropped for a in adds[1:]),
              "qBittorrent performed the first add (answered 'Ok.', never heard by umt); "
              "umt asked again: " + ", ".join(repr(a.answer) for a in adds[1:]))
        check(bool(done) and _detail(done[-1]).get("present_before") is False,
              "the run still knows the torrent is its own (present_before=false)")
        check(len(files) == 1 and sha256_of(files[0]) == payload_hash,
              "the film was downloaded and imported once, byte for byte")
        check(not leftover, "cleanup removed the torrent from qBittorrent")
    finally:
        proxy.stop()


def _detail(row: dict[str, Any]) -> dict[str, Any]:
    """A ledger row's detail (``case.ledger`` has decoded it), ``{}`` when it has none."""
    return dict(row["detail"] or {})


@scenario("rename-kill", "Copy finished but the result was not committed: no double import",
          setup="umt CLI; fake qBittorrent; the first worker (`spikes.umt_cli`, "
                "SPIKE_FAULTS=stop-after-rename) stops itself right after renaming the copy "
                "into the library and is killed there; the next is a plain `umt worker`")
def killed_between_rename_and_commit(case: Case) -> None:
    case.section.summary = (
        "Worker A imports a 16 MiB film by copy; right after the temporary file is renamed "
        "onto its library name — before the step's result is committed — A stops and is "
        "killed with `kill -9`. Worker A2 re-executes copy-file: it must recognise the "
        "finished import and not copy again.")
    case.configure(poll="0.5s")
    migrate(case)
    fake, hash_hex, run_id = _signaled_acquisition(case, "rename", "Rename Film", 16 << 20)
    a = case.worker("A", workflows=["acquire"], faults="stop-after-rename")
    stopped = wait_until(lambda: a.state() == "T", 60, interval=0.05)
    files = library_files(case)
    before = [(p, p.stat().st_ino, p.stat().st_mtime_ns) for p in files]
    ledger_at_kill = case.ledger(run_id)
    copy_at_kill = case.sql(f"SELECT status FROM {case.table('steps')} WHERE run_id = :r "
                            "AND name = 'copy-file'", r=run_id)
    os.killpg(a.pid, signal.SIGKILL)
    a.popen.wait(10)
    case.section.say(f"A (pid {a.pid}) stopped after the rename: {bool(stopped)}; library "
                     f"file present: {[case.shorten(str(p)) for p in files]}; copy-file step "
                     f"then: {copy_at_kill[0]['status'] if copy_at_kill else '-'}; killed.")
    case.ledger_block([r for r in ledger_at_kill if r["operation"].startswith("copy:")],
                      title="ledger at the kill")
    case.worker("A2")
    run = case.settled(run_id, 40)
    case.umt("status", run_id)
    show = case.umt("show", run_id, show=False).json or {}
    attempts_block(case, show)
    ledger = case.ledger(run_id)
    case.ledger_block([r for r in ledger if r["operation"].startswith(("copy:", "catalog:"))],
                      title="ledger after")
    after = [(p, p.stat().st_ino, p.stat().st_mtime_ns) for p in library_files(case)]
    catalog = case.umt("catalog").json or []
    expected = fake.content_sha256(hash_hex)
    copy_phases = [r["phase"] for r in ledger_at_kill if r["operation"].startswith("copy:")]
    done = [r for r in ledger if r["operation"].startswith("copy:") and r["phase"] == "done"]
    check = case.section.check
    check(bool(stopped) and len(files) == 1 and "done" not in copy_phases
          and bool(copy_at_kill) and copy_at_kill[0]["status"] != "succeeded",
          "killed between the rename and the commit: the file is in the library, the step "
          "is not committed, the ledger has no `done` (" + ", ".join(copy_phases) + ")")
    check(run.status == "succeeded", f"the run succeeded ({run.status})")
    check(after == before and len(after) == 1 and sha256_of(after[0][0]) == expected
          and not _partials(case),
          "no double import: the same file (same inode, same mtime), intact, nothing else")
    check(len(done) == 1 and _detail(done[0]).get("recovered") is True,
          "A2 recognised the finished import from the ledger and the file (done, recovered)")
    check(len(catalog) == 1, "one catalog entry")


@scenario("copy-freeze", "A worker frozen mid-copy wakes up while the new owner copies",
          setup="umt CLI; fake qBittorrent; both workers copy at 16 MB/s (`spikes.umt_cli`, "
                "SPIKE_FAULTS=slow-copy=16)")
def frozen_mid_copy(case: Case) -> None:
    case.section.summary = (
        "Worker A copies a 64 MiB film at 16 MB/s and is frozen (SIGSTOP) at 16 MiB. Its 2 s "
        "lease expires; worker B takes the run over and starts the copy again (each writer has a "
        "temporary name of its own). A is resumed while B is still copying: A must stop "
        "without touching B's temporary file, and B's copy must complete on its first attempt.")
    case.configure(lease="2s", poll="0.5s")
    migrate(case)
    fake, hash_hex, run_id = _signaled_acquisition(case, "copy-freeze", "Frozen Film", 64 << 20)
    a = case.worker("A", workflows=["acquire"], faults="slow-copy=16")
    wait_until(lambda: [p for p in _partials(case) if _size(p) >= 16 << 20], 60, interval=0.05)
    case.freeze(a, run_id)
    a_partials = set(_partials(case))
    b = case.worker("B", workflows=["acquire"], faults="slow-copy=16")
    b_id = case.wait_registered(b)

    def b_partial() -> Path | None:
        """B's own temporary file (not one A had when frozen), once it holds 4 MiB."""
        intents = [r for r in case.ledger(run_id) if r["operation"].startswith("copy:")
                   and str(r["worker_id"]) == b_id and r["phase"] == "intent"]
        own = [p for p in _partials(case) if p not in a_partials and _size(p) >= 4 << 20]
        return own[0] if intents and own else None

    b_file = wait_until(b_partial, 30, interval=0.05)
    b_size_at_resume = _size(b_file) if b_file is not None else 0
    published = _LibraryWatch(case)
    a.send(signal.SIGCONT)
    case.section.say(
        f"A frozen mid-copy ({', '.join(case.shorten(str(p)) for p in a_partials)}); B took "
        "over and was writing its own temporary file "
        f"({case.shorten(str(b_file)) if b_file else 'none'}, {b_size_at_resume >> 20} MiB) "
        "when A was resumed.")
    run = case.settled(run_id, 60)
    published.stop()
    show = case.umt("show", run_id, show=False).json or {}
    attempts_block(case, show)
    case.ledger_block([r for r in case.ledger(run_id) if r["operation"].startswith("copy:")])
    labels = case.worker_labels()
    copy = step_of(show, "copy-file")
    b_attempts = [x for x in copy["attempts"] if labels.get(str(x["worker_id"])) == "B"]
    files = library_files(case)
    check = case.section.check
    check(b_file is not None and b_size_at_resume < 64 << 20,
          "B was copying into its own temporary file (not A's) when A was resumed "
          f"({b_size_at_resume >> 20} of 64 MiB)")
    check(run.status == "succeeded", f"the run succeeded ({run.status})")
    check([x["status"] for x in b_attempts] == ["succeeded"],
          "B's copy succeeded on its first attempt (" + ", ".join(
              f"{x['status']}: {(x.get('error') or {}).get('message', '')[:80]}"
              for x in b_attempts) + ")")
    b_done = [r for r in case.ledger(run_id) if r["operation"].startswith("copy:")
              and r["phase"] == "done" and labels.get(str(r["worker_id"])) == "B"]
    b_inode = (b_done[0]["detail"] or {}).get("inode") if b_done else None
    check(len(files) == 1 and published.inodes == {b_inode} == {files[0].stat().st_ino},
          "the library file was published once, by B: the file B recorded is the only one "
          f"ever seen at the library name ({len(published.inodes)} seen)")
    check(len(files) == 1 and sha256_of(files[0]) == fake.content_sha256(hash_hex)
          and not _partials(case), "one intact library file, no partial one")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:  # renamed or removed meanwhile
        return 0


class _LibraryWatch:
    """Every distinct file (inode) seen under the library's final names while it runs."""

    def __init__(self, case: Case) -> None:
        self.case = case
        self.inodes: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(0.02):
            for path in self.case.library.rglob("*"):
                if not path.name.endswith(".umt-partial"):
                    with contextlib.suppress(OSError):  # gone meanwhile
                        if path.is_file():
                            self.inodes.add(path.stat().st_ino)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


# ---------------------------------------------------------------------- library integrity


@scenario("path-race", "Two runs racing for one library path: one file, one owner",
          setup="umt CLI; fake qBittorrent; one worker with a slow disk (`spikes.umt_cli`, "
                "SPIKE_FAULTS=slow-copy=16 MB/s) and concurrency 2, so both runs copy at once")
def racing_for_one_path(case: Case) -> None:
    case.section.summary = (
        "Two different torrents, each a folder with a 24 MiB `Race Film.mkv`, started with the "
        "same `--name`: both map to `Race Film/Race Film.mkv`. Their done signals are sent "
        "ahead and one worker executes both at once on a slow disk. The library path is "
        "claimed before a byte is written: one run must import its file, the other must fail "
        "naming the holder, and keep its download.")
    case.configure(poll="0.5s", concurrency=2)
    migrate(case)
    fake = case.fake_qbittorrent()
    hashes = [info_hash(f"race-{n}-{case.backend}") for n in (1, 2)]
    for n, hash_hex in enumerate(hashes, start=1):
        # Two releases, each a folder of its own holding a `Race Film.mkv`.
        fake.prepare(hash_hex, f"Race Film release {n}", 24 << 20,
                     files=[("Race Film.mkv", 24 << 20), ("release.nfo", 100)])
        case.umt("signal", f"download-done:{hash_hex}")
    run_ids = [_start(case, hash_hex, "Race Film", "--name", "Race Film") for hash_hex in hashes]
    case.worker("A", workflows=["acquire"], faults="slow-copy=16")
    runs = [case.settled(run_id, 120) for run_id in run_ids]
    for run_id in run_ids:
        case.ledger_block([r for r in case.ledger(run_id) if r["operation"].startswith("copy:")],
                          title=f"ledger of {run_id[:8]}")
    winners = [i for i, run in enumerate(runs) if run.status == "succeeded"]
    losers = [i for i, run in enumerate(runs) if run.status == "failed"]
    files = library_files(case)
    destination = case.library / "Race Film" / "Race Film.mkv"
    live = {t.info_hash for t in fake.live_torrents()}
    case.section.block([
        f"statuses: {[run.status for run in runs]}",
        f"library: {[case.shorten(str(p)) for p in files]}",
        f"torrents still in qBittorrent: {sorted(h[:8] for h in live)}",
    ])
    check = case.section.check
    check(len(winners) == 1 and len(losers) == 1,
          f"one run succeeded, one failed ({[run.status for run in runs]})")
    if len(winners) != 1 or len(losers) != 1:
        return
    winner, loser = winners[0], losers[0]
    message = str((runs[loser].error or {}).get("message", ""))
    check(f"library path {destination} is held by run {run_ids[winner]}" in message,
          f"the loser names the holder: {message[:160]}")
    check(files == [destination]
          and sha256_of(destination) == fake.content_sha256(hashes[winner]),
          "one library file, with the winner's content, byte for byte")
    loser_torrent = fake.torrents[hashes[loser]]
    check(hashes[loser] in live and Path(loser_torrent.content_path).exists(),
          "the loser's torrent and its downloaded data are still there")
    catalog = case.umt("catalog").json or []
    check([item.get("run_id") for item in catalog] == [run_ids[winner]],
          "one catalog entry, the winner's")


@scenario("cancel-retention", "Cancel during retention: seeding stops, the import stays",
          setup="umt CLI and `umt worker`; real qbittorrent-nox (seeder + the client umt "
                "drives), umt's finish hook installed in it")
def cancel_during_retention(case: Case) -> None:
    case.section.summary = (
        "A real acquisition with a 1 h retention; once it sleeps (imported, seeding), "
        "`umt cancel`. The torrent and its downloaded data must go; the library file and its "
        "catalog entry must stay.")
    from tests.support.qbittorrent import make_payload

    swarm, leecher = case.spikes.real_qbittorrent()
    case.configure(qbittorrent=(leecher.url, leecher.username, leecher.password,
                                leecher.download_dir), import_mode="copy", poll="1s")
    migrate(case)
    seed_dir = case.dir / "seed"
    payload_hash = make_payload(seed_dir, "Kept Film.mkv", 4 << 20, seed=11)
    seeded = swarm.seed(seed_dir / "Kept Film.mkv")
    torrent_file = case.dir / "kept.torrent"
    torrent_file.write_bytes(seeded.torrent_bytes)
    case.umt("qbittorrent", "install-hook", show=False)
    started = case.umt("start-acquire", str(torrent_file), "--retention", "1h")
    run_id = str((started.json or {}).get("run_id"))
    case.worker("A")
    sleeping = case.wait_run(run_id, lambda r: r.status == "sleeping" or r.finished, 90)
    [before] = leecher.client().torrents_info(torrent_hashes=seeded.info_hash) or [None]
    content = Path(before.content_path) if before is not None else None
    cancel = case.umt("cancel", run_id, "--wait", "60")
    run = case.settled(run_id, 60)
    show = case.umt("show", run_id, show=False).json or {}
    attempts_block(case, show)
    case.ledger_block(case.ledger(run_id))
    leftover = leecher.client().torrents_info(torrent_hashes=seeded.info_hash)
    files = library_files(case)
    catalog = case.umt("catalog").json or []
    check = case.section.check
    check(sleeping.status == "sleeping", f"the run slept in retention ({sleeping.status})")
    check(cancel.code == 0 and run.status == "canceled" and run.compensation == "succeeded",
          f"canceled, compensation {run.compensation}")
    check(not leftover and content is not None and not content.exists(),
          "the torrent and its downloaded data are gone from qBittorrent")
    check(len(files) == 1 and sha256_of(files[0]) == payload_hash,
          "the library file stays, byte for byte")
    check([item.get("run_id") for item in catalog] == [run_id], "its catalog entry stays")
