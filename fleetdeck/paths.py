"""Where fleetdeck keeps its own state on an operator's machine: ``$XDG_STATE_HOME/fleetdeck``
(``~/.local/state/fleetdeck``) — the audit log, the history store, console recordings and the
demo's per-run directories. One definition, so every front end agrees."""

import os
from pathlib import Path


def state_base() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(Path.home(), ".local", "state")
    return Path(base) / "fleetdeck"


def recordings_dir() -> Path:
    """Where the console's ``R`` writes recordings unless told otherwise (never the current
    directory: a console started from a repository would litter it)."""
    return state_base() / "recordings"


def given_file(path: str, flag: str) -> Path:
    """A file the user named (``--db``, ``--audit-log``) to be written: its folder must exist.
    A default path's folders are made (``state_base``); a typed one's were too, and
    ``--db /nonexistent/dir/x.db`` made ``/nonexistent/dir`` at the root (a newcomer's run),
    where ``record --out`` refused the same."""
    from fleetdeck.errors import UserError

    file = Path(path).expanduser()
    if not file.parent.exists():
        raise UserError(f"{flag} {path}: folder {file.parent} does not exist (create it, or "
                        f"give {flag} a file in a folder that does).")
    return file


def recording_out(path: str) -> Path:
    """``--out`` of ``record`` and ``sim``: a recording is a file and its index beside it, so
    ``-`` (stdout to a script writer) made files named ``-`` and ``-.idx`` in the current
    folder (a newcomer's scripts)."""
    from fleetdeck.errors import UserError

    if path.strip() in ("-", ""):
        raise UserError("--out needs a file name (.jsonl, or .jsonl.gz): a recording is a file "
                        "with an index beside it, not a stream on stdout; 'fleetdeck replay "
                        "FILE --headless --summary-json' reads one back for a script.")
    return given_file(path, "--out")


def open_to_others(path: Path) -> str | None:
    """The mode (``0644``) of a secret file that users other than its owner and group may
    read, or None. ssh refuses such a key; fleetdeck warns (an agent that refused to start
    would stop reporting the node), saying what to chmod."""
    try:
        mode = path.stat().st_mode & 0o777
    except OSError:
        return None
    return f"{mode:04o}" if mode & 0o004 else None


DEMO_BROKER_FILE = "broker.json"
"""In a running demo's folder: its private broker's address and the demo's pid, so a command
typed in a second terminal against that broker is audited in the demo's log, not the
operator's real one (README, "Two commands")."""

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def mark_demo_broker(folder: Path, host: str, port: int) -> Path:
    """Say, in the demo's ``folder``, that this process runs a demo whose broker is at
    ``host:port``; the demo removes the file on exit (a dead pid is ignored as well)."""
    import json

    mark = folder / DEMO_BROKER_FILE
    mark.write_text(json.dumps({"host": host, "port": port, "pid": os.getpid()}) + "\n")
    return mark


def running_demo(host: str, port: int) -> Path | None:
    """The folder of a demo still running whose private broker is ``host:port`` (a loopback
    name for it), or None. A second terminal's ``drain`` against the demo wrote the operator's
    real audit log, mixing drills with their production trail (a newcomer's run)."""
    import json

    if host not in _LOOPBACK:
        return None  # the demo's broker listens on loopback only
    try:
        marks = sorted(state_base().glob(f"demo-*/{DEMO_BROKER_FILE}"), reverse=True)
    except OSError:
        return None
    for mark in marks:
        try:
            said = json.loads(mark.read_text())
            pid, its_port = int(said["pid"]), int(said["port"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if its_port != port or str(said.get("host")) not in _LOOPBACK or not _alive(pid):
            continue
        return mark.parent
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True
