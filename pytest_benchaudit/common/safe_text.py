"""Text from a model or an endpoint, made safe to print on a terminal or in a CI log.

A model's answer (or an endpoint's error page) may hold control characters: ESC starts a
terminal escape sequence (clear the screen, recolour or hide the rest of a CI log, retitle the
window), CR and backspace overwrite what was printed before them, NUL ends the text early for
some log viewers, and the C1 controls (U+0080-U+009F, CSI among them) act like ESC sequences on
some terminals.  Unicode's bidirectional overrides reorder what follows them on screen.

:func:`printable` writes each such character as a visible Python-style escape (``\\x1b``,
``\\r``, ``\\x00``, ``\\u202e``), so what is shown is what was sent, and nothing sent can act
on the terminal.  Records keep the raw text; only what is displayed is escaped.
"""

from __future__ import annotations

import re

__all__ = ["printable"]

# C0 controls but tab and newline, DEL, C1 controls, the line/paragraph separators and the
# bidirectional embeddings, overrides and isolates.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_UNSAFE_ONE_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group(0)
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def printable(text: str, *, multiline: bool = False) -> str:
    """``text`` with every control character written as a visible escape.

    ``multiline=True`` keeps newlines and tabs (a display meant to span lines); otherwise they
    are escaped too, so the text stays on one line.  Text without such characters is returned
    unchanged (the same object).
    """
    pattern = _UNSAFE if multiline else _UNSAFE_ONE_LINE
    if pattern.search(text) is None:
        return text
    return pattern.sub(_escape, text)
