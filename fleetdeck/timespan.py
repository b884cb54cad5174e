"""Lengths of time as operators type them: ``90``, ``90s``, ``15m``, ``2h``, ``7d``, ``1h30m``,
and clock times as the views show them: ``18:40``, ``18:40:05``.

One parser for the console's ``--since`` and the replay's ``:seek`` (the agents' simulator has
its own, with its scenario file's errors: agents/sim/rates.py)."""

import math
import re

_PART = re.compile(r"(\d+(?:\.\d+)?)([dhms])")
_UNIT_S = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
_CLOCK = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2}(?:\.\d+)?))?")


def span_s(text: str) -> float | None:
    """Seconds of ``text`` (a plain number is seconds), or None when it is not a span; never
    negative, NaN or infinite (the caller reads a sign itself)."""
    body = text.strip()
    try:
        seconds = float(body)
    except ValueError:
        parts = _PART.findall(body)
        if not parts or "".join(n + u for n, u in parts) != body:
            return None
        seconds = sum(float(n) * _UNIT_S[u] for n, u in parts)
    if not math.isfinite(seconds) or seconds < 0 or body[:1] in "+-":
        return None
    return seconds


def clock_s(text: str) -> float | None:
    """Seconds after midnight of ``HH:MM`` or ``HH:MM:SS`` (fractions allowed), or None when
    ``text`` is not a time of day (``25:00`` neither); which day is the caller's to say."""
    found = _CLOCK.fullmatch(text.strip())
    if found is None:
        return None
    h, m, sec = int(found.group(1)), int(found.group(2)), float(found.group(3) or 0)
    if h > 23 or m > 59 or sec >= 60:
        return None
    return h * 3600 + m * 60 + sec
