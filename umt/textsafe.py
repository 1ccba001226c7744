"""Text from strangers (torrent and file names, magnets, signal data), made safe to show.

A torrent name is chosen by whoever made the torrent: printed raw, an ESC sequence in it can
move the cursor, rewrite earlier lines or set the terminal's title. Everything shown to a
person goes through :func:`printable` first; JSON output escapes such characters by itself,
and HTML escaping is the templates' job (this module only handles what HTML escaping leaves:
control characters).
"""

from __future__ import annotations

import unicodedata

__all__ = ["printable", "redact_url"]

#: Bidirectional overrides and isolates: they reorder what the terminal shows
#: ("exe.mkv" shown as "vkm.exe").
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def printable(text: object, *, keep_newlines: bool = False) -> str:
    """``text`` with every control character shown as an escape (``\\x1b``, ``\\u202e``).

    C0 and C1 controls (ESC, BEL, CR, DEL, U+0080-U+009F), bidirectional overrides and
    undecodable bytes become visible escapes; everything else is kept as it is. With
    ``keep_newlines`` a ``\\n`` stays a line break (multi-line messages).
    """
    value = str(text)
    if value.isprintable() and not any(ch in _BIDI_CONTROLS for ch in value):
        return value
    return "".join(_shown(ch, keep_newlines) for ch in value)


def _shown(ch: str, keep_newlines: bool) -> str:
    if ch == "\n" and keep_newlines:
        return ch
    if ch in _BIDI_CONTROLS or _is_control(ch):
        code = ord(ch)
        return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"
    return ch


def _is_control(ch: str) -> bool:
    # Cc: C0/C1 controls and DEL; Cs: lone surrogates (undecodable bytes from the OS);
    # Zl/Zp: line and paragraph separators, which break a table's lines like a newline.
    return unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp")


def is_utf8(text: str) -> bool:
    """False for text the OS decoded with surrogate escapes (bytes that are not UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def redact_url(url: str) -> str:
    """``url`` with its password (userinfo) and every query value masked, to be shown."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return "(an unparseable URL)"
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]
    query = "&".join(
        f"{pair.partition('=')[0]}=***" if "=" in pair else pair
        for pair in parts.query.split("&")
    ) if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))
