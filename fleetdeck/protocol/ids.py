"""Node, cluster and job identifiers.

Ids become MQTT topic levels, so they must never carry ``/``, ``+``, ``#`` or control
characters; they also end up in terminal cells and file names, hence the narrow alphabet.
"""

import re

MAX_ID_LEN = 64
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class InvalidId(ValueError):
    """An identifier that may not be used as a topic level."""


def is_valid_id(value: str) -> bool:
    return _ID_RE.fullmatch(value) is not None


def validate_id(value: str, what: str = "id") -> str:
    """Return ``value`` if it is a valid id, else raise :class:`InvalidId` with a plain reason."""
    if is_valid_id(value):
        return value
    shown = value.encode("unicode_escape").decode("ascii")[:80]
    if not value:
        reason = "is empty"
    elif len(value) > MAX_ID_LEN:
        reason = f"is longer than {MAX_ID_LEN} characters"
    else:
        reason = (
            "may only hold letters, digits, '.', '_' and '-' and must start with a letter or digit"
        )
    raise InvalidId(f"{what} '{shown}' {reason}")
