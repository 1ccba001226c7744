"""The consoles commands print through: rich, with every stranger's control character escaped.

Imported when a command first prints, not before: the finish hook for another tool's torrent
prints nothing and never loads rich.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

from rich.console import Console
from rich.segment import Segment

from umt.textsafe import printable


class SafeConsole(Console):
    """A console that shows every control character in the text it prints as an escape.

    Titles, file names and signal data come from strangers; an ESC sequence in a torrent's name
    must not move the cursor or rewrite the terminal. Rich's own control segments (the live
    display of ``show --follow``) pass untouched: only the text is escaped, here, in the one
    place every table, line and panel goes through.
    """

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            segment if segment.control else
            Segment(printable(segment.text, keep_newlines=True), segment.style)
            for segment in buffer
        )


def console(*, stderr: bool) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    # Piped output is not cut at 80 columns: run ids and paths must stay whole for grep.
    width = None if stream.isatty() or os.environ.get("COLUMNS") else 200
    return SafeConsole(stderr=stderr, markup=False, highlight=False, width=width)
