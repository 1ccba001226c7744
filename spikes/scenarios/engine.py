"""Engine-level scenarios on the spike workflows (``spikes/workflows.py``): a frozen worker,
retries, version upgrade and drift, a shared database, bursts, PostgreSQL restarts, sleepers.

``umt worker`` cannot load workflows other than ``acquire``, so these workers and the starts of
spike runs go through ``python -m spikes.umt_cli`` (umt's CLI with the spike workflows
registered and one extra command, ``spike-start``). Signals, cancels, status and show are plain
``umt`` commands.
"""

from __future__ import annotations

import contextlib
import json
import signal
import time
from typing import Any

import psycopg

from spikes.harness import Case, wait_until
from spikes.report import compact
from spikes.scenarios import (
    PG_ONLY,
    attempts_block,
    info_hash,
    magnet,
    migrate,
    scenario,
    timestamp,
)
from spikes.workflows import BURST, FLAKY, HOLDER, SHARED, SLEEPER, UPGRADE

SPIKE_CLI = "workers and spike runs: python -m spikes.umt_cli (umt's CLI + spike workflows)"


def _start(case: Case, workflow: str, spec: Any, *extra: str) -> str:
    result = case.umt("spike-start", workflow, "--input", json.dumps(spec), *extra, spike=True)
    if result.code != 0 or not result.json:
        raise RuntimeError(f"spike-start failed: {result.stderr.strip()}")
    return str(result.json["run_id"])


# ---------------------------------------------------------------------- (b) SIGSTOP


@scenario("b-freeze", "Lease loss by SIGSTOP/SIGCONT: the frozen worker's writes are rejected",
          setup=SPIKE_CLI)
def frozen_worker(case: Case) -> None:
    case.section.summary = (
        "Worker A runs `hold`, a step body that writes its intent, then sleeps 4 s without "
        "checking anything. A is frozen with SIGSTOP inside that body; its 2 s lease expires; "
        "worker B takes the run over (a new lease epoch) and runs `hold` again. A is resumed "
        "with SIGCONT while B is still inside `hold`: A's body returns and the engine tries "
        "to commit its result and its `done` ledger row — the one write a frozen worker makes "
        "when it wakes up. The fence must reject it.")
    case.configure(lease="2s", poll="0.5s")
    migrate(case)
    a = case.worker("A", workflows=[f"{HOLDER}@1"], concurrency=1)
    a_id = case.wait_registered(a)
    run_id = _start(case, f"{HOLDER}@1", {"hold": 4})

    def hold_intent(worker_id: str | None, exclude: str | None = None) -> dict[str, Any] | None:
        for row in case.ledger(run_id):
            if row["step"] == "hold" and row["phase"] == "intent" and (
                    worker_id is None or str(row["worker_id"]) == worker_id) and (
                    str(row["worker_id"]) != exclude):
                return row
        return None

    if not wait_until(lambda: hold_intent(a_id), 30):
        raise RuntimeError("worker A never reached the hold step")
    case.freeze(a, run_id)
    stopped_at = time.time()
    time.sleep(0.2)  # a heartbeat A had already sent commits now, or never
    lease_until = timestamp(case.run(run_id).lease_expires_at) - stopped_at
    case.worker("B", workflows=[f"{HOLDER}@1"], concurrency=1)
    b_intent = wait_until(lambda: hold_intent(None, exclude=a_id), 30)
    b_took_over = time.time()
    a.send(signal.SIGCONT)
    b_claimed = min((timestamp(x["started_at"]) for x in case.attempts(run_id)
                     if b_intent is not None and str(x["worker_id"]) == str(
                         b_intent["worker_id"])), default=stopped_at) - stopped_at
    case.section.say(
        f"A (pid {a.pid}) frozen with SIGSTOP at +0.0 s, its lease running until "
        f"+{lease_until:.1f} s; B's first attempt at +{b_claimed:.1f} s, its `hold` intent at "
        f"+{b_took_over - stopped_at:.1f} s; A resumed with SIGCONT right after.")
    run = case.settled(run_id, 30)
    time.sleep(0.5)  # let A finish logging what it was refused
    status = case.umt("status", run_id)
    show = case.umt("show", run_id, show=False).json or {}
    attempts_block(case, show)
    ledger = case.ledger(run_id)
    case.ledger_block(ledger)
    refused = a.log_lines("lease lost", "no longer held", "LeaseLost")
    if refused:
        case.section.block(["worker A's log after SIGCONT:", *(
            "  " + line.split(" ", 2)[-1][:160] for line in refused[:4])])
    done = [row for row in ledger if row["step"] == "hold" and row["phase"] == "done"]
    b_epoch = b_intent["lease_epoch"] if b_intent else None
    a_rows_after = [row for row in ledger if str(row["worker_id"]) == a_id
                    and b_intent is not None and row["id"] > b_intent["id"]]
    hold_attempts: list[dict[str, Any]] = next((s["attempts"] for s in show.get("steps", [])
                          if s["name"] == "hold"), [])
    a_attempts = [x for x in hold_attempts if str(x["worker_id"]) == a_id]
    check = case.section.check
    check(run.status == "succeeded" and status.code == 0, f"the run succeeded ({run.status})")
    check(b_intent is not None and b_claimed >= lease_until,
          "B took the run over only once A's lease had expired (A's process was alive, only "
          "frozen)")
    labels = case.worker_labels()
    found = [(labels.get(str(r["worker_id"])), r["lease_epoch"]) for r in done]
    check(len(done) == 1 and b_intent is not None and str(done[0]["worker_id"]) != a_id
          and done[0]["lease_epoch"] == b_epoch,
          f"exactly one `done` row for hold, written by B at epoch {b_epoch} (found {found})")
    check(not a_rows_after, "no ledger row of A after B's takeover (A's late commit was "
          f"rejected; rows of A after it: {len(a_rows_after)})")
    check(bool(a_attempts) and all(x["status"] != "succeeded" for x in a_attempts),
          "A's attempt of hold is not succeeded ("
          + ", ".join(x["status"] for x in a_attempts) + ")")
    check(bool(refused), "A was told: its log says the lease was lost")


# ---------------------------------------------------------------------- (e) retries


@scenario("e", "Step retries and maximum attempts",
          setup=SPIKE_CLI + "; acquire through the fake qBittorrent")
def retries(case: Case) -> None:
    case.section.summary = (
        "`spike-flaky` fails its first n attempts (policy: at most 3 attempts, 0.3 s backoff "
        "doubling). An acquisition meets a qBittorrent that answers HTTP 500 to the first two "
        "add requests: `submit-download` is retried by the engine with the acquire workflow's "
        "own policy (first retry after 2 s).")
    case.configure(poll="0.5s")
    migrate(case)
    fake = case.fake_qbittorrent()
    worker = case.worker("A", workflows=[f"{FLAKY}@1", "acquire"], concurrency=4)
    case.wait_registered(worker)
    recovers = _start(case, f"{FLAKY}@1", {"fail_times": 2, "max_attempts": 3})
    exhausts = _start(case, f"{FLAKY}@1", {"fail_times": 5, "max_attempts": 3})
    hash_hex = info_hash(f"retry-{case.backend}")
    fake.prepare(hash_hex, "Retry Film", 2 << 20)
    fake.fail_next("torrents/add", times=2, status=500)
    case.umt("signal", f"download-done:{hash_hex}")
    acquire = case.umt("start-acquire", magnet(hash_hex, "Retry Film"), "--retention", "1s")
    acquire_id = str((acquire.json or {}).get("run_id"))
    first = case.settled(recovers, 20)
    second = case.settled(exhausts, 20)
    time.sleep(1.0)  # a fourth attempt would come 1.2 s after the third
    case.umt("status", recovers)
    case.umt("status", exhausts)
    for run_id in (recovers, exhausts):
        attempts_block(case, case.umt("show", run_id, show=False).json or {})
    third = case.settled(acquire_id, 40)
    acquire_show = case.umt("show", acquire_id, show=False).json or {}
    attempts_block(case, acquire_show)
    case.ledger_block([r for r in case.ledger(acquire_id) if r["step"] == "submit-download"])
    case.section.block(["fake qBittorrent, torrents/add:",
                        *("  " + call.line() for call in fake.calls_to("torrents/add"))])
    flaky1 = case.attempts(recovers)
    flaky2 = case.attempts(exhausts)
    submit = [a for a in case.attempts(acquire_id) if a["position"] == 0 and a["phase"] == "main"]
    check = case.section.check
    check(first.status == "succeeded" and [a["status"] for a in flaky1]
          == ["failed", "failed", "succeeded"],
          "2 failures then success: succeeded at attempt 3 ("
          + ", ".join(a["status"] for a in flaky1) + ")")
    message = (second.error or {}).get("message", "")
    check(second.status == "failed" and len(flaky2) == 3
          and all(a["status"] == "failed" for a in flaky2) and "boom attempt 3" in message,
          f"5 planned failures, 3 allowed: failed after exactly 3 attempts, error {message!r}")
    statuses = [a["status"] for a in submit]
    check(third.status == "succeeded" and len(statuses) >= 2
          and statuses[-1] == "succeeded" and all(
              s == "failed" and "HTTP 500" in str(a["error"])
              for s, a in zip(statuses[:-1], submit, strict=False)),
          "qBittorrent's HTTP 500s (qbittorrent-api repeats a failed request once): "
          f"submit-download failed, was retried after 2 s and succeeded ({', '.join(statuses)});"
          f" run {third.status}")
    check(len(fake.live_torrents()) == 0 and sum(
        1 for c in fake.calls_to("torrents/add") if "Ok." in str(c.status)) == 1,
          "the torrent was added exactly once (and removed by cleanup)")


# ---------------------------------------------------------------------- (g) versions


@scenario("g", "Version upgrade: an unregistered version is neither claimed nor churned; "
          "replay drift is detected", setup=SPIKE_CLI)
def versions(case: Case) -> None:
    case.section.summary = (
        "A run of `spike-upgrade` version 1 waits for `go:<run>`. The v1 worker is stopped "
        "(SIGTERM) and only a v2 worker runs; the signal makes the v1 run due. Then a worker "
        "registers version 1 again, but with code that gained a step (`extra-verify` before "
        "the wait) without bumping the version.")
    case.configure(poll="0.5s")
    migrate(case)
    v1 = case.worker("v1", workflows=[f"{UPGRADE}@1"])
    case.wait_registered(v1)
    run_id = _start(case, f"{UPGRADE}@1", {})
    case.wait_run(run_id, ["waiting"], 20)
    case.umt("status", run_id)
    exit_code = v1.stop(30)
    case.section.say(f"v1 worker stopped with SIGTERM: exit {exit_code}.")
    v2 = case.worker("v2", workflows=[f"{UPGRADE}@2"])
    case.wait_registered(v2)
    control = _start(case, f"{UPGRADE}@2", {})
    case.umt("signal", f"go:{run_id}", "--run", run_id)
    before = case.run(run_id)
    attempts_before = len(case.attempts(run_id))
    case.wait_run(control, ["waiting"], 20)
    case.umt("signal", f"go:{control}", "--run", control)
    control_run = case.settled(control, 20)
    time.sleep(max(0.0, 3.0 - (time.time() - timestamp(before.updated_at))))
    after = case.run(run_id)
    case.umt("status", run_id)
    case.section.say(
        f"Meanwhile the v2 worker ran a v2 run to the end ({control_run.status}); the v1 run "
        f"stayed as it was for {time.time() - timestamp(before.updated_at):.1f} s.")
    case.worker("v1+drift", workflows=[f"{UPGRADE}@1+drift"])
    failed = case.settled(run_id, 15)
    case.umt("status", run_id)
    ledger = case.ledger(run_id)
    case.ledger_block(ledger)
    message = (failed.error or {}).get("message", "")
    check = case.section.check
    check(exit_code == 0, "the v1 worker stopped cleanly on SIGTERM")
    check(before.status == "pending" and after.status == "pending"
          and after.lease_epoch == before.lease_epoch and after.updated_at == before.updated_at
          and after.error is None and len(case.attempts(run_id)) == attempts_before,
          f"v1 run due but untouched while only v2 ran: status {after.status}, lease epoch "
          f"{before.lease_epoch}→{after.lease_epoch}, no new attempt, no error")
    check(control_run.status == "succeeded", "the v2 worker was alive and ran v2 runs")
    check(failed.status == "failed" and (failed.error or {}).get("type") == "ReplayDrift"
          and "extra-verify" in message,
          f"the drifted v1 code stopped the run with a message naming the step: {message!r}")
    check([r["step"] for r in ledger if r["phase"] == "done"] == ["prepare"],
          "prepare was not re-run and neither extra-verify nor finish ran")


# ---------------------------------------------------------------------- (h) shared database


@scenario("h", "Shared database with a business schema; step result and business write in "
          "one transaction", setup=SPIKE_CLI + "; the caller's transaction through umt.engine")
def shared_database(case: Case) -> None:
    case.section.summary = (
        "Another application's table lives in the same database (`spike_biz.orders` on "
        "PostgreSQL, `spike_orders` in the SQLite file). `spike-shared`'s step buffers an "
        "insert into it through the step transaction. The first attempt's commit hits a "
        "row the other application already holds (unique key): neither the step's result, "
        "nor its ledger row, nor the order may exist after it; the conflicting row is then "
        "removed and the retry commits all three together.")
    case.configure(poll="0.5s")
    if case.pg:
        case.sql("CREATE SCHEMA spike_biz")
        table = "spike_biz.orders"
    else:
        table = "spike_orders"
    case.sql(f"CREATE TABLE {table} (order_key text PRIMARY KEY, run_id text, attempt integer)"
             if not case.pg else
             f"CREATE TABLE {table} (order_key text PRIMARY KEY, run_id uuid, attempt integer)")
    case.sql(f"INSERT INTO {table} (order_key) VALUES ('other-application-row')")
    migrate(case, show=True)
    check = case.section.check
    if case.pg:
        tables = case.umt("tables").json or {}
        names = tables.get("tables", [])
        check(all(n.startswith(("umt.", "umt_media.")) for n in names) and "umt.runs" in names
              and "umt_media.ledger" in names,
              "umt keeps to its own schemas (umt, umt_media); spike_biz is not umt's")
        _start_in_caller_transaction(case)
    check(len(case.sql(f"SELECT * FROM {table} WHERE order_key = 'other-application-row'"))
          == 1, "umt's migrations left the other application's table and row alone")
    case.sql(f"INSERT INTO {table} (order_key) VALUES ('k-atomic')")
    case.worker("A", workflows=[f"{SHARED}@1"])
    run_id = _start(case, f"{SHARED}@1", {"order_key": "k-atomic"})

    def first_failure() -> list[dict[str, Any]] | None:
        rows = [a for a in case.attempts(run_id) if a["status"] == "failed"]
        return rows or None

    failures = wait_until(first_failure, 20, interval=0.02)
    # What exists right after the refused commit, before the conflict is cleared:
    steps = case.sql(f"SELECT status, result FROM {case.table('steps')} WHERE run_id = :r",
                     r=run_id)
    orders = case.sql(f"SELECT * FROM {table} WHERE run_id = :r", r=run_id)
    done_rows = [r for r in case.ledger(run_id) if r["phase"] == "done"]
    case.section.block([
        "after the first attempt's commit was refused:",
        f"  attempt 1: {(failures or [{}])[0].get('status')}: "
        f"{case.shorten(str((failures or [{}])[0].get('error')))[:200]}",
        f"  step rows: {compact_rows(steps)}", f"  orders of the run: {len(orders)}",
        f"  ledger done rows: {len(done_rows)}",
    ])
    check(bool(failures) and all(s["result"] is None for s in steps) and not orders
          and not done_rows,
          "the refused commit left nothing: no step result, no order, no ledger row")
    case.sql(f"DELETE FROM {table} WHERE order_key = 'k-atomic'")
    run = case.settled(run_id, 20)
    show = case.umt("show", run_id, show=False).json or {}
    attempts_block(case, show)
    case.ledger_block(case.ledger(run_id))
    orders = case.sql(f"SELECT * FROM {table} WHERE run_id = :r", r=run_id)
    case.section.block([f"{table} rows of the run: {compact_rows(orders)}"])
    result = (run.output or {}) if isinstance(run.output, dict) else {}
    done_rows = [r for r in case.ledger(run_id) if r["phase"] == "done"]
    check(run.status == "succeeded" and len(orders) == 1 and len(done_rows) == 1
          and orders[0]["attempt"] == result.get("attempt") == done_rows[0]["attempt"],
          "the retry committed result, order and ledger row together, once (attempt "
          f"{result.get('attempt')})")


def compact_rows(rows: list[dict[str, Any]]) -> str:
    return compact(rows, 300)


def _start_in_caller_transaction(case: Case) -> None:
    """``Engine.start`` joining the application's own transaction (PostgreSQL)."""
    from spikes.workflows import build

    engine = case.engine
    definition = build(f"{SHARED}@1")
    with psycopg.connect(case.db_url) as conn:
        with contextlib.suppress(_Rollback), conn.transaction():
            conn.execute("INSERT INTO spike_biz.orders (order_key) VALUES ('tx-rolled-back')")
            with engine.joined(conn) as session:
                rolled = engine.start(definition, {"order_key": "never"}, session=session)
            raise _Rollback
        with conn.transaction():
            conn.execute("INSERT INTO spike_biz.orders (order_key) VALUES ('tx-committed')")
            with engine.joined(conn) as session:
                committed = engine.start(definition, {"order_key": "in-tx"},
                                         idempotency_key="in-tx", session=session)
    runs = {str(r["id"]) for r in case.sql("SELECT id FROM umt.runs")}
    orders = {r["order_key"] for r in case.sql("SELECT order_key FROM spike_biz.orders")}
    case.section.block([
        "Engine.start(..., session=engine.joined(conn)) inside the application's transaction:",
        f"  rolled back: run {rolled.run.id[:8]} exists: {rolled.run.id in runs}; order "
        f"'tx-rolled-back' exists: {'tx-rolled-back' in orders}",
        f"  committed:   run {committed.run.id[:8]} exists: {committed.run.id in runs}; order "
        f"'tx-committed' exists: {'tx-committed' in orders}",
    ])
    case.section.check(rolled.run.id not in runs and "tx-rolled-back" not in orders
                       and committed.run.id in runs and "tx-committed" in orders,
                       "start joins the caller's transaction: the run exists only if the "
                       "business transaction commits")
    case.engine.cancel(committed.run.id)  # it is not part of what follows


class _Rollback(Exception):
    pass


# ---------------------------------------------------------------------- (i) burst


@scenario("i", "Two workers, a 60-run burst, no duplicates", setup=SPIKE_CLI)
def burst_of_60(case: Case) -> None:
    case.section.summary = (
        "Workers A and B (4 slots each) run at the same time; 60 `spike-burst` runs are "
        "started at once. Each step body writes `intent` when it starts, naps 0.1 s (its work) "
        "and writes `done` with its result.")
    case.configure(poll="1s")
    migrate(case)
    a = case.worker("A", workflows=[f"{BURST}@1"], concurrency=4)
    b = case.worker("B", workflows=[f"{BURST}@1"], concurrency=4)
    case.wait_registered(a)
    case.wait_registered(b)
    began = time.monotonic()
    started = case.umt("spike-start", f"{BURST}@1", "--count", "60", "--key-prefix", "burst",
                       "--input", '{"steps": 1, "nap": 0.1}', spike=True)
    run_ids = list((started.json or {}).get("run_ids") or [])

    def all_done() -> bool:
        rows = case.sql(f"SELECT count(*) AS n FROM {case.table('runs')} "
                        "WHERE status = 'succeeded'")
        return int(rows[0]["n"]) >= 60

    def bodies_started() -> int:
        rows = case.sql(f"SELECT count(*) AS n FROM {case.table('ledger')} "
                        "WHERE phase = 'intent'")
        return int(rows[0]["n"])

    # A body started twice already fails the scenario: no need to wait for the rest.
    wait_until(lambda: all_done() or bodies_started() > 60, 60, interval=0.2)
    elapsed = time.monotonic() - began
    ledger = case.ledger()
    labels = case.worker_labels()
    done = [r for r in ledger if r["phase"] == "done"]
    intents = [r for r in ledger if r["phase"] == "intent"]
    per_worker: dict[str, int] = {}
    for row in done:
        label = labels.get(str(row["worker_id"]), "?")
        per_worker[label] = per_worker.get(label, 0) + 1
    statuses = case.sql(f"SELECT status, count(*) AS n FROM {case.table('runs')} "
                        "GROUP BY status ORDER BY status")
    summary = {"total": len(done), "runs": len({str(r["run_id"]) for r in done}),
               "bodies_started": len(intents), **per_worker}
    case.section.block([json.dumps(summary), *(f"{r['status']}|{r['n']}" for r in statuses),
                        f"{summary['runs']} runs finished {elapsed:.1f} s after the start command"])
    check = case.section.check
    check(len(run_ids) == 60 and all_done(), "all 60 runs succeeded")
    check(len(done) == 60 and summary["runs"] == 60,
          "60 committed effects for 60 runs: no duplicates")
    check(len(intents) == 60, "60 step bodies started: none ran twice")


# ---------------------------------------------------------------------- PostgreSQL restarts


@scenario("pg-500", "PostgreSQL restarted every few seconds while 500 runs complete",
          backends=PG_ONLY, setup=SPIKE_CLI)
def restarts_500(case: Case) -> None:
    case.section.summary = (
        "Workers A and B (8 slots each) and a client that starts 500 two-step `spike-burst` "
        "runs (each step naps 0.25 s; the client retries each start while the database is "
        "away, and the idempotency key makes a retried start find the run its lost answer "
        "had created). Meanwhile PostgreSQL is stopped and started again every 2.5 s, "
        "alternately cleanly (`pg_ctl restart -m fast`) and by SIGKILL of every server "
        "process (crash recovery).")
    case.configure(poll="1s", lease="10s")
    migrate(case)
    cluster = case.spikes.postgres()
    a = case.worker("A", workflows=[f"{BURST}@1"], concurrency=8)
    b = case.worker("B", workflows=[f"{BURST}@1"], concurrency=8)
    case.wait_registered(a)
    case.wait_registered(b)
    from spikes.harness import PYTHON, child_env

    client = case.spikes.spawn(
        "client", [PYTHON, "-m", "spikes.umt_cli", "--config", str(case.config_path), "--json",
                   "spike-start", f"{BURST}@1", "--count", "500", "--key-prefix", "r500",
                   "--input", '{"steps": 2, "nap": 0.25}', "--retry-for", "60"],
        child_env(), case.dir / "client.log")
    case.procs.append(client)
    began = time.monotonic()
    restarts: list[str] = []
    downtime = 0.0

    def succeeded() -> int:
        try:
            rows = case.sql(f"SELECT count(*) AS n FROM {case.table('runs')} "
                            "WHERE status = 'succeeded'")
        except psycopg.OperationalError:
            return -1
        return int(rows[0]["n"])

    progress: list[str] = []
    while time.monotonic() - began < 180:
        time.sleep(2.5)
        done = succeeded()
        progress.append(f"+{time.monotonic() - began:5.1f} s: {done} succeeded")
        if done >= 500 or not (a.alive() and b.alive()):
            break  # a worker that exited fails the scenario: no need to wait for the rest
        down = time.monotonic()
        if len(restarts) % 2 == 0:
            cluster.restart()
            restarts.append("fast")
        else:
            cluster.kill()
            cluster.start()
            restarts.append("kill -9")
        downtime += time.monotonic() - down
    elapsed = time.monotonic() - began
    final = wait_until(lambda: succeeded() >= 500, 60 if a.alive() and b.alive() else 0) \
        and succeeded()
    with contextlib.suppress(Exception):
        client.popen.wait(30)
    client_out = client.log()
    runs = case.sql("SELECT status, count(*) AS n FROM umt.runs GROUP BY status")
    keys = case.sql("SELECT count(*) AS n, count(DISTINCT idempotency_key) AS k FROM umt.runs")
    effects = case.sql("SELECT count(*) AS n, count(DISTINCT (run_id, step)) AS d "
                       "FROM umt_media.ledger WHERE phase = 'done'")
    intents = case.sql("SELECT count(*) AS n FROM umt_media.ledger WHERE phase = 'intent'")
    unavailable = sum(len(p.log_lines("database unavailable", "unreachable")) for p in (a, b))
    case.section.block([
        *progress,
        f"{len(restarts)} restarts ({', '.join(restarts)}), {downtime:.1f} s of them spent "
        f"stopping and starting; {'all 500' if final == 500 else int(final or 0)} runs done "
        f"after {elapsed:.1f} s",
        f"runs by status: {compact_rows(runs)}",
        f"runs: {keys[0]['n']}, distinct idempotency keys: {keys[0]['k']}",
        f"committed effects (ledger done): {effects[0]['n']}, distinct (run, step): "
        f"{effects[0]['d']}; step bodies started (ledger intent): {intents[0]['n']}",
        f"worker log lines about the database being away: {unavailable}",
        "client: " + _client_summary(client_out),
    ])
    check = case.section.check
    check(len(restarts) >= 2, f"PostgreSQL went down {len(restarts)} times during the runs")
    check(final == 500 and keys[0]["n"] == 500 and keys[0]["k"] == 500,
          "zero lost: 500 runs, 500 succeeded")
    check(effects[0]["n"] == 1000 and effects[0]["d"] == 1000,
          "zero duplicated: exactly one committed effect per step (1000)")
    check(client.popen.returncode == 0, "the client started all 500 runs despite the restarts")
    check(a.alive() and b.alive(), "no worker exited")


def _client_summary(output: str) -> str:
    start, end = output.find("{"), output.rfind("}")
    try:
        return json.dumps(json.loads(output[start:end + 1]))
    except ValueError:
        return output.strip()[-300:] or "(no output)"


@scenario("pg-sleep", "PostgreSQL restart during a durable sleep", backends=PG_ONLY,
          setup="umt CLI and `umt worker`; fake qBittorrent")
def restart_during_sleep(case: Case) -> None:
    case.section.summary = (
        "An acquisition sleeps in `retention` (20 s) when PostgreSQL is restarted (fast "
        "shutdown, start). The restart must fall inside the sleep (it ends before the timer "
        "is due); the worker must survive, the timer fire once, the run finish.")
    case.configure(poll="1s")
    migrate(case)
    fake = case.fake_qbittorrent()
    hash_hex = info_hash("pg-sleep")
    fake.prepare(hash_hex, "Sleep Film", 1 << 20)
    case.umt("signal", f"download-done:{hash_hex}")
    started = case.umt("start-acquire", magnet(hash_hex, "Sleep Film"), "--retention", "20s")
    run_id = str((started.json or {}).get("run_id"))
    worker = case.worker("A")
    asleep = case.wait_run(run_id, ["sleeping"], 30)
    wake_at = timestamp(asleep.due_at) if asleep.due_at is not None else 0.0
    case.umt("status", run_id)
    cluster = case.spikes.postgres()
    down = time.time()
    cluster.restart()
    up = time.time()
    case.section.say(f"PostgreSQL restarted from +0.0 s to +{up - down:.1f} s; the timer was due "
                     f"at +{wake_at - down:.1f} s.")
    run = case.settled(run_id, 40)
    case.umt("status", run_id)
    show = case.umt("show", run_id, show=False).json or {}
    attempts_block(case, show)
    away = worker.log_lines("database unavailable", "unreachable")
    case.section.block(["worker log:", *("  " + line[:170] for line in away[:3]),
                        f"  ({len(away)} lines about the database being away)"])
    steps = {s["name"]: s for s in show.get("steps", [])}
    check = case.section.check
    check(down < up < wake_at, "the restart fell inside the sleep: PostgreSQL was back "
          f"{wake_at - up:.1f} s before the timer was due")
    check(run.status == "succeeded", f"the run succeeded ({run.status})")
    cleanup = steps.get("cleanup", {}).get("attempts", [])
    check(steps.get("retention", {}).get("status") == "succeeded" and len(cleanup) == 1
          and timestamp(cleanup[0]["started_at"]) >= wake_at,
          "the timer fired once, when due: retention succeeded, cleanup ran once, after "
          "the sleep's end")
    check(worker.alive(), "the worker did not exit")


# ---------------------------------------------------------------------- 10,000 sleepers


@scenario("sleepers-10k", "10,000 sleeping runs: what polling costs", backends=PG_ONLY,
          setup=SPIKE_CLI + "; pg_stat_statements")
def ten_thousand_sleepers(case: Case) -> None:
    case.section.summary = (
        "10,000 `spike-sleeper` runs are started (one transaction) and parked by two workers "
        "(each run sleeps 1 h). Then the two idle workers are watched for 15 s with the "
        "default poll interval (5 s): pg_stat_statements counts every statement they make.")
    case.configure(poll="5s")
    migrate(case)
    case.sql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    started = case.umt("spike-start", f"{SLEEPER}@1", "--count", "10000", "--one-transaction",
                       "--key-prefix", "s10k", "--input", '{"duration": "1h"}', spike=True,
                       show=False)
    began = time.monotonic()
    workers = [case.worker(label, workflows=[f"{SLEEPER}@1"], concurrency=32)
               for label in ("A", "B")]

    def sleeping() -> int:
        rows = case.sql("SELECT count(*) AS n FROM umt.runs WHERE status = 'sleeping'")
        return int(rows[0]["n"])

    wait_until(lambda: sleeping() >= 10000, 240, interval=0.5)
    parked_in = time.monotonic() - began
    parked = sleeping()
    # Vacuum now, so that autovacuum's own transactions do not land in the window.
    for table in ("umt.runs", "umt.steps", "umt.attempts", "umt.workers"):
        case.sql(f"VACUUM ANALYZE {table}")
    time.sleep(1.0)
    window = 15.0
    dbid = case.sql("SELECT oid FROM pg_database WHERE datname = current_database()")[0]["oid"]
    case.sql("SELECT pg_stat_statements_reset()")
    time.sleep(window)
    stats = case.sql(
        "SELECT calls, total_exec_time, query FROM pg_stat_statements "
        "WHERE dbid = :d AND query NOT LIKE '%pg_stat_statements%' "
        "ORDER BY calls DESC", d=dbid)
    calls = sum(int(s["calls"]) for s in stats)
    server_ms = sum(float(s["total_exec_time"]) for s in stats)
    lines = [
        case.shorten(f"$ {started.shown}"), json.dumps(started.json),
        f"10,000 runs parked (sleeping) {parked_in:.1f} s after the workers started "
        f"({parked / max(parked_in, 0.001):.0f} runs/s)",
        f"idle window {window:.0f} s, 2 workers, 10,000 sleepers:",
        f"  statements: {calls} ({calls / window:.1f}/s), server time {server_ms:.1f} ms "
        f"({server_ms / window:.2f} ms/s)",
        "  by statement (calls, mean ms, query):",
    ]
    for stat in stats[:8]:
        mean = float(stat["total_exec_time"]) / max(int(stat["calls"]), 1)
        query = " ".join(str(stat["query"]).split())[:110]
        lines.append(f"    {stat['calls']:>4} {mean:7.3f}  {query}")
    case.section.block(lines)
    running = case.sql("SELECT count(*) AS n FROM umt.runs WHERE status <> 'sleeping'")
    claims = sum(int(s["calls"]) for s in stats if _is_claim(str(s["query"])))
    polls_expected = 2 * int(window // 5.0) - 2
    slowest = max((float(s["total_exec_time"]) / max(int(s["calls"]), 1) for s in stats),
                  default=0.0)
    check = case.section.check
    check(parked == 10000 and running[0]["n"] == 0, "all 10,000 runs sleep, none holds a worker")
    check(all(w.alive() for w in workers) and claims >= polls_expected,
          f"both workers were alive and polling through the window: {claims} claim queries "
          f"(at least {polls_expected} expected from two workers polling every 5 s)")
    check(calls / window < 10, f"idle polling stays cheap: {calls / window:.1f} statements/s for "
          "two workers (fewer than 10)")
    check(slowest < 20, f"no idle statement is slow with 10,000 sleepers (slowest mean "
          f"{slowest:.2f} ms)")


def _is_claim(query: str) -> bool:
    """The statement a worker's poll makes: the claim that leases due runs."""
    text = " ".join(query.split()).lower()
    return "skip locked" in text and "lease_owner" in text
