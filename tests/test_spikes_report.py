"""The spike report's failure digest: the last lines a CI log shows must name what failed."""

from spikes.report import Report, Section


def test_the_digest_names_each_failed_check_and_error_but_no_passing_scenario() -> None:
    passing = Section("a", "Main path", "SQLite")
    passing.check(True, "imported")
    failing = Section("partition", "Cut off", "PostgreSQL")
    failing.check(True, "the worker noticed")
    failing.check(False, "the partial file was removed before the new owner began")
    broken = Section("d", "Cancel", "SQLite")
    try:
        raise RuntimeError("qBittorrent did not start")
    except RuntimeError as exc:
        broken.failed_with(exc)
    report = Report(header=[], sections=[passing, failing, broken])

    digest = report.failure_digest()

    assert digest.splitlines()[0] == "spikes: 2 of 3 FAIL"
    assert "(partition) PostgreSQL" in digest
    assert "FAIL: the partial file was removed before the new owner began" in digest
    assert "the worker noticed" not in digest
    assert "(d) SQLite" in digest and "qBittorrent did not start" in digest
    assert "(a)" not in digest
