"""HMAC-SHA256 command signatures: defence in depth behind the broker's ACL.

A broker account that may write ``…/cmd`` (a leaked console password, a misconfigured ACL) is
still not enough to drain a node when agents are configured with a command key: every command
must carry ``sig`` = HMAC-SHA256(key, canonical JSON of the command without ``sig``), be
unexpired, have a bounded lifetime, and carry an id the agent has not executed before.
"""

import hashlib
import hmac
import json
import logging
from pathlib import Path

from fleetdeck.errors import UserError
from fleetdeck.paths import open_to_others
from fleetdeck.protocol.messages import Command

MAX_LIFETIME_MS = 10 * 60 * 1000
"""A signed command may not be valid for longer than this (a captured one soon goes stale)."""
MAX_CLOCK_SKEW_MS = 60 * 1000
MIN_KEY_BYTES = 16


def canonical(cmd: Command) -> bytes:
    body = cmd.model_dump(mode="json", exclude={"sig"})
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def sign(cmd: Command, key: bytes) -> Command:
    sig = hmac.new(key, canonical(cmd), hashlib.sha256).hexdigest()
    return cmd.model_copy(update={"sig": sig})


def check(cmd: Command, key: bytes, now_ms: int) -> str:
    """Empty if ``cmd`` is properly signed and timely, else the reason to reject it."""
    # Each says what the sender must be given: the CLI's "rejected (unsigned command (this
    # agent requires signed commands))" named no way to sign (a newcomer's production set-up).
    if not cmd.sig:
        return ("unsigned command (this agent requires signed commands: give the sender "
                "--command-key FILE or $FLEETDECK_COMMAND_KEY_FILE, the agents' key)")
    expected = hmac.new(key, canonical(cmd), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, cmd.sig):
        return ("bad signature (forged, altered, or signed with another key than the agents' "
                "--command-key)")
    if cmd.expires_at - cmd.issued_at > MAX_LIFETIME_MS:
        return "command lifetime exceeds 10 minutes"
    if cmd.issued_at > now_ms + MAX_CLOCK_SKEW_MS:
        return "command issued in the future (clock skew > 60 s?)"
    return ""


def load_key(path: str | Path) -> bytes:
    """Read a command key file (any bytes; surrounding whitespace ignored)."""
    p = Path(path)
    try:
        key = p.read_bytes().strip()
    except OSError as err:
        raise UserError(f"cannot read command key {p}: {err.strerror}.") from None
    if len(key) < MIN_KEY_BYTES:
        raise UserError(f"command key {p} is shorter than {MIN_KEY_BYTES} bytes; make one with "
                        "'(umask 077; head -c 32 /dev/urandom | base64 > FILE)'.")
    mode = open_to_others(p)
    if mode is not None:
        # Whoever reads the key signs drains that every agent obeys (an SRE drill found one
        # left 0644 by `head … > command.key` under a default umask).
        logging.getLogger("fleetdeck.signing").warning(
            "command key %s is readable by every user of this machine (mode %s): anyone here "
            "can sign commands; chmod 0600 it (0640 with the service's group)", p, mode)
    return key
