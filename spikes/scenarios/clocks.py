"""(skew) Workers on hosts whose clocks are 45 s ahead of and behind the PostgreSQL server's.

Each worker is ``umt worker`` (through ``spikes.umt_cli``) under libfaketime, posing as a worker
on a host of its own (``SPIKE_FAULTS=other-host=…``) so that only the lease lets one take the
other's runs. The evidence times are the server's own (``clock_timestamp()`` read by the step
bodies and by the spikes), never a worker's.
"""

from __future__ import annotations

import json
import signal
import statistics
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

from spikes.harness import Case, wait_until
from spikes.scenarios import PG_ONLY, migrate, scenario
from spikes.workflows import NAPPER
from tests.support.faketime import shifted

LEASE = 4.0
RUNS = 50
NAP = timedelta(seconds=2)
SKEW = 45
#: How closely a worker knows the server's time: its measurement's round trip (well under a
#: millisecond on one machine, more while the machine is busy).
PRECISION = timedelta(milliseconds=100)


def _start(case: Case, spec: dict[str, Any], *extra: str) -> Any:
    result = case.umt("spike-start", f"{NAPPER}@1", "--input", json.dumps(spec), *extra,
                      spike=True)
    if result.code != 0 or not result.json:
        raise RuntimeError(f"spike-start failed: {result.stderr.strip()}")
    return result.json


def _server_now(case: Case) -> datetime:
    now: datetime = case.sql("SELECT clock_timestamp() AS now")[0]["now"]
    return now


@scenario("skew", "Workers 45 s ahead of and behind the PostgreSQL server's clock",
          backends=PG_ONLY,
          setup="umt worker under libfaketime (FAKETIME=+45s / -45s), each posing as another "
                "host; `spike-napper` runs started with python -m spikes.umt_cli")
def skewed_clocks(case: Case) -> None:
    case.section.summary = (
        f"Worker A's clock is {SKEW} s ahead of the database server's, worker B's {SKEW} s "
        f"behind; the lease is {LEASE:g} s, so with each host's own clock A would see every "
        f"lease of B expired and B would take A's runs over {SKEW} s late. Both live while "
        f"{RUNS} runs of 3 steps with a {NAP.total_seconds():g} s durable sleep complete; then "
        "A is killed (kill -9) inside a step and B must take its run over when the lease "
        "expires by the server's clock.")
    case.configure(lease=f"{LEASE:g}s", poll="1s", concurrency=4)
    migrate(case)
    shift = {"A": +SKEW, "B": -SKEW}
    offsets = {label: _doctor_clock(case, seconds) for label, seconds in shift.items()}
    workers = {label: case.worker(label, workflows=[f"{NAPPER}@1"], concurrency=4,
                                  faults=f"other-host=host-{label.lower()}",
                                  env=shifted(seconds))
               for label, seconds in shift.items()}
    ids = {label: case.wait_registered(proc) for label, proc in workers.items()}

    started = _start(case, {"nap": f"{NAP.total_seconds():g}s"}, "--count", str(RUNS),
                     "--key-prefix", "skew")
    run_ids = list(started.get("run_ids") or [])
    runs_table = case.table("runs")

    def all_finished() -> bool:
        rows = case.sql(f"SELECT count(*) AS n FROM {runs_table} WHERE id = ANY(:ids::uuid[]) "
                        "AND finished_at IS NOT NULL", ids=run_ids)
        return int(rows[0]["n"]) == len(run_ids)

    wait_until(all_finished, 120, interval=0.2)
    runs = case.sql(f"SELECT id, status, lease_epoch FROM {runs_table} "
                    "WHERE id = ANY(:ids::uuid[])", ids=run_ids)
    attempts = case.sql(f"SELECT status, attempt, worker_id FROM {case.table('attempts')} "
                        "WHERE run_id = ANY(:ids::uuid[])", ids=run_ids)
    naps = {str(row["run_id"]): row["wake_at"] for row in case.sql(
        f"SELECT run_id, wake_at FROM {case.table('steps')} "
        "WHERE name = 'nap' AND run_id = ANY(:ids::uuid[])", ids=run_ids)}
    ledger = case.sql(f"SELECT run_id, step, phase, detail FROM {case.table('ledger')} "
                      "WHERE run_id = ANY(:ids::uuid[])", ids=run_ids)
    began = {(str(r["run_id"]), str(r["step"])):
             datetime.fromisoformat(r["detail"]["at"]) for r in ledger if r["phase"] == "intent"}
    per_step = Counter((str(r["run_id"]), str(r["step"]), r["phase"])
                       for r in ledger)

    takeovers = sum(int(run["lease_epoch"]) - 2 for run in runs)
    duplicates = sum(n - 1 for n in per_step.values() if n > 1)
    asked = [naps[run_id] - began[(run_id, "s1")] for run_id in run_ids]
    overshoot = [began[(run_id, "s2")] - naps[run_id] for run_id in run_ids]
    early = [o for o in overshoot if o < timedelta(0)]
    by_worker = Counter(str(a["worker_id"]) for a in attempts)
    overshoot_ms = [o.total_seconds() * 1000 for o in overshoot]

    # kill -9 of A inside a step
    workers["B"].send(signal.SIGSTOP)  # so that A claims the next run
    try:
        held = _start(case, {"nap": "1s", "hold": 120})["run_id"]
        case.wait_run(held, lambda run: run.lease_owner is not None and run.started_at, 30)
        holder = case.run(held).lease_owner
        wait_until(lambda: case.sql(f"SELECT 1 FROM {case.table('ledger')} WHERE run_id = "
                                    ":id::uuid AND phase = 'intent'", id=held), 30)
    finally:
        workers["B"].send(signal.SIGCONT)
    workers["A"].send(signal.SIGKILL)
    workers["A"].popen.wait(10)
    killed_at = _server_now(case)
    expires = case.run(held).lease_expires_at
    # a clock off by a skew would take it over that much later: not worth waiting for
    wait_until(lambda: case.run(held).lease_owner == ids["B"] or None, LEASE + 10)
    retaken = wait_until(lambda: [r for r in case.sql(
        f"SELECT detail FROM {case.table('ledger')} WHERE run_id = :id::uuid "
        "AND phase = 'intent'", id=held) if r["detail"]["epoch"] == 2], 5) or []
    taken_at = datetime.fromisoformat(retaken[0]["detail"]["at"]) if retaken else None

    label_of = {worker_id: label for label, worker_id in ids.items()}
    lines = ["| worker | FAKETIME | offset measured by `umt doctor` | skew warning logged "
             "| attempts executed |", "| --- | --- | --- | --- | --- |"]
    for label, proc in workers.items():
        warned = proc.log_lines("off the database server's")
        lines.append(f"| {label} | {shift[label]:+d}s | {offsets[label]} | "
                     f"{'yes' if warned else 'no'} | "
                     f"{by_worker.get(str(ids[label]), 0)} |")
    case.section.say("\n".join(lines))
    taken_after = (taken_at - expires).total_seconds() if taken_at and expires else None
    evidence = [
        ("runs succeeded", f"{sum(r['status'] == 'succeeded' for r in runs)} / {len(run_ids)}"),
        ("lease takeovers while both lived (sum of lease epochs - 2 claims per run)",
         str(takeovers)),
        ("attempts other than a first that succeeded",
         str(sum(1 for a in attempts if (a["status"], a["attempt"]) != ("succeeded", 1)))),
        ("duplicate ledger rows (intent or done, per run and step)", str(duplicates)),
        ("sleep asked for (wake_at - s1 start), min / max",
         f"{min(asked).total_seconds():.3f} s / {max(asked).total_seconds():.3f} s"),
        ("wake-ups earlier than asked (s2 start < wake_at)", str(len(early))),
        ("wake overshoot (s2 start - wake_at), median / max",
         f"{statistics.median(overshoot_ms):.0f} ms / {max(overshoot_ms):.0f} ms"),
        ("after kill -9 of A: B's takeover - A's lease expiry",
         f"{taken_after:.2f} s" if taken_after is not None else "(no takeover)"),
        ("after kill -9 of A: B's takeover - the kill",
         f"{(taken_at - killed_at).total_seconds():.2f} s" if taken_at else "(no takeover)"),
    ]
    case.section.say("| evidence (server's clock) | value |\n| --- | --- |\n" + "\n".join(
        f"| {name} | {value} |" for name, value in evidence))

    check = case.section.check
    check(all(offsets[label] != "?" for label in shift)
          and all(proc.log_lines("off the database server's") for proc in workers.values()),
          "each host's offset is measured (umt doctor) and its worker warns about it")
    check(len(runs) == RUNS and all(r["status"] == "succeeded" for r in runs),
          f"all {RUNS} runs succeeded")
    check(takeovers == 0 and all((a["status"], a["attempt"]) == ("succeeded", 1)
                                 for a in attempts),
          "no lease takeover while both workers lived")
    check(set(label_of) <= {str(a["worker_id"]) for a in attempts}, "both workers took part")
    check(duplicates == 0 and len(per_step) == RUNS * 3 * 2, "no duplicate effect")
    check(not early and all(NAP - PRECISION <= a < NAP + timedelta(seconds=LEASE)
                            for a in asked),
          "every sleep woke no earlier than asked, by the server's clock (asked 2 s after its "
          "step started, to within the worker's measurement of the server's clock)")
    check(str(holder) == str(ids["A"]) and taken_after is not None and 0 <= taken_after <= 1.0
          and taken_at is not None and taken_at - killed_at <= timedelta(seconds=LEASE + 1),
          "after kill -9, B took A's run over within 1 s of the lease's expiry by the server's "
          "clock (and within lease + 1 s of the kill)")


def _doctor_clock(case: Case, seconds: int) -> str:
    """The clock check of ``umt doctor`` run on a host whose clock is ``seconds`` off."""
    report = case.umt("doctor", env=shifted(seconds), show=False).json or {}
    for check in report.get("checks", []):
        if check["name"] == "clock":
            case.section.block(f"$ FAKETIME={seconds:+d}s umt --json doctor → clock: "
                               f"{check['status']}: {check['detail']}")
            return f"{check['status']}: {check['detail'].split(';')[0]}"
    return "?"
