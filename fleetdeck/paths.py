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
