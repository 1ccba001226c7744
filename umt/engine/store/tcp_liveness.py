"""How fast a PostgreSQL connection notices that its peer is gone: TCP keepalives and
``tcp_user_timeout``, derived from the lease.

Without them a connection whose path is cut waits for TCP's retransmission backoff (minutes)
and an idle one (the LISTEN connection) never notices at all. With them the kernel gives up
within about a third of the lease, so a statement fails while the worker can still act on it.
Any of these parameters given in ``database.url`` (``?keepalives_idle=…``) wins over ours.
"""

from __future__ import annotations

from datetime import timedelta

from psycopg.conninfo import conninfo_to_dict

#: Below this a busy but healthy network could be taken for a dead one.
SHORTEST_DETECTION = 5.0
KEEPALIVE_PROBES = 3


def liveness_parameters(lease: timedelta) -> dict[str, str]:
    """libpq parameters that detect a dead peer within ``lease / 3`` (at least 5 s): an idle
    connection by keepalive probes, a connection with unacknowledged data by the user timeout."""
    detection = max(lease.total_seconds() / 3, SHORTEST_DETECTION)
    idle = max(1, int(detection / 2))
    interval = max(1, int((detection - idle) / KEEPALIVE_PROBES))
    return {
        "keepalives": "1",
        "keepalives_idle": str(idle),
        "keepalives_interval": str(interval),
        "keepalives_count": str(KEEPALIVE_PROBES),
        "tcp_user_timeout": str(int(detection * 1000)),
    }


def not_in_url(url: str, parameters: dict[str, str]) -> dict[str, str]:
    """``parameters`` without those the URL sets itself: psycopg lets keyword arguments override
    the URL, and the user's word is the one that counts."""
    given = conninfo_to_dict(url)
    return {name: value for name, value in parameters.items() if name not in given}
