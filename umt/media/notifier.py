"""Messages to the user through Apprise (any of its services: ntfy, Telegram, e-mail, …).

Apprise is imported on first use, so commands that send nothing do not pay for it. An Apprise
URL usually holds a token: it is never shown; a service is named by its scheme and position.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import ModuleType


class NotifyFailed(Exception):
    """A notification service did not take the message (retried by the step)."""


@dataclass(frozen=True)
class NotifyTarget:
    url: str = field(repr=False)
    position: int

    @property
    def label(self) -> str:
        """How the service is shown: its scheme and position, never the URL (it holds tokens)."""
        scheme = self.url.partition("://")[0] if "://" in self.url else "?"
        return f"{scheme}#{self.position}"

    def send(self, title: str, body: str) -> None:
        sender = _apprise().Apprise()
        if not sender.add(self.url):
            raise NotifyFailed(f"{self.label}: not a usable Apprise URL")
        try:
            taken = sender.notify(body=body, title=title)
        except Exception as exc:  # its text may quote the URL: only the kind is kept
            raise NotifyFailed(f"{self.label}: {type(exc).__name__} in Apprise") from None
        if not taken:
            raise NotifyFailed(f"{self.label}: the service did not take the message")


def targets(urls: Sequence[str]) -> tuple[NotifyTarget, ...]:
    return tuple(NotifyTarget(url, position) for position, url in enumerate(urls, start=1))


def syntax_problem(url: str) -> str | None:
    """Why Apprise cannot use ``url`` (None: it can); parses only, sends nothing."""
    if _apprise().Apprise.instantiate(url) is None:
        return "not a URL of a service Apprise knows (see its wiki for the form)"
    return None


def _apprise() -> ModuleType:
    """Apprise, whose own log lines are kept out of umt's: they quote the URLs, tokens and all."""
    quiet = logging.getLogger("apprise")
    quiet.propagate = False
    if not quiet.handlers:
        quiet.addHandler(logging.NullHandler())
    import apprise

    return apprise
