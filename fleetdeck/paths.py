"""Where fleetdeck keeps its own state on an operator's machine: ``$XDG_STATE_HOME/fleetdeck``
(``~/.local/state/fleetdeck``) — the audit log, the history store, console recordings and the
demo's per-run directories. One definition, so every front end agrees."""

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol


class _BrokerURL(Protocol):
    """What ``running_demo`` reads of a ``fleetdeck.brokerurl.BrokerURL`` (not imported:
    the protocol layer imports this module, and that one brings the MQTT clients)."""

    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def tls(self) -> bool: ...
    @property
    def username(self) -> str | None: ...
    @property
    def ca_file(self) -> str | None: ...
    @property
    def cert_file(self) -> str | None: ...
    @property
    def key_file(self) -> str | None: ...


def state_base() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(Path.home(), ".local", "state")
    return Path(base) / "fleetdeck"


def recordings_dir() -> Path:
    """Where the console's ``R`` writes recordings unless told otherwise (never the current
    directory: a console started from a repository would litter it)."""
    return state_base() / "recordings"


def not_a_file(path: str | Path) -> str:
    """Why ``path`` is no regular file to read, as the end of a sentence ('' for none): "is a
    directory", "is a named pipe (FIFO), not a file" or "does not exist". A FIFO given as
    --ca, --config or --scenario read "no such file" (a CLI fuzz round)."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "does not exist"
    except OSError as err:  # a loop of links, a name too long, a folder not readable
        return f"cannot be read ({err.strerror})"
    if stat.S_ISREG(mode):
        return ""
    if stat.S_ISDIR(mode):
        return "is a directory, not a file"
    kind = ("a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a device")
    return f"is {kind}, not a regular file"


def unreadable(path: str | Path) -> str:
    """Why this user cannot read the file at ``path``, lower case ('' when it can): a TLS
    file or a store read "[Errno 13] Permission denied" naming no file, or opened on it and
    failed later (a CLI round)."""
    try:
        with open(path, "rb"):
            pass
    except OSError as err:
        return (err.strerror or str(err)).lower()
    return ""


def not_a_file_to_write(path: str | Path) -> str:
    """``not_a_file`` for a file to be written: '' too for one not there yet, a link to one
    not there yet included (the write makes the link's target, as SQLite and ``open`` do).
    Refused as "does not exist", a store or a recording kept on a bigger disk through a link
    made before its first run could not be started at all."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return ""
    except OSError:
        pass  # a loop of links, a folder not searchable: not_a_file says which
    return not_a_file(path)


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
    out = given_file(path, "--out")
    why = not_a_file_to_write(out)
    if why:
        # "already exists; … pass --force to overwrite that recording" of a folder, and with
        # --force "cannot write …: Is a directory".
        raise UserError(f"--out {path} {why}: give it a recording's file name "
                        "(.jsonl or .jsonl.gz).")
    return out


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
"""In a running demo's folder: its private broker's address, its cluster and the demo's pid,
so a command typed in a second terminal against that broker is audited in the demo's log, not
the operator's real one (README, "Two commands"). The demo holds an exclusive ``flock`` on it
for its whole life: a mark left by a demo killed with SIGKILL (or an OOM kill, a reboot) is
unlocked by the kernel, so a later real broker on that port, with the pid reused, is never
taken for the demo. It names the host's boot and the network namespace too (``_where``):
``flock`` reaches across NFS clients and namespaces, and 127.0.0.1 in another container
(sharing ``$HOME``) or on another login node is another socket, not the demo's broker."""

_BOOT_ID = "/proc/sys/kernel/random/boot_id"
_NETNS = "/proc/self/ns/net"


def _where() -> dict[str, object]:
    """What 127.0.0.1 means here: the host's boot id (one per boot of one host, so another
    login node sharing the folder over NFS has another, and it outlives a change of host
    name), the network namespace (the inode of ``/proc/self/ns/net``: a container's own) and
    the host name, the stand-in for the boot id where that cannot be read (off Linux). None
    for what cannot be read."""
    import socket

    try:
        boot: str | None = Path(_BOOT_ID).read_text().strip() or None
    except OSError:
        boot = None
    try:
        netns: int | None = os.stat(_NETNS).st_ino
    except OSError:
        netns = None
    return {"boot_id": boot, "netns": netns, "hostname": socket.gethostname() or None}


def _known(said: dict[str, object], key: str) -> object:
    """``said[key]`` as ``_where`` writes it, or None: not known (a mark from before the
    field, one side unable to read it, or a value of the wrong kind)."""
    value = said.get(key)
    if key == "netns":
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    return value if isinstance(value, str) and value else None


def _elsewhere(here: dict[str, object], there: dict[str, object]) -> bool:
    """Whether a mark written ``there`` is known to be on another host or in another network
    namespace than ``here``. Only what both sides know is compared; the host name only where
    the boot ids cannot be, as it changes under a running demo (DHCP, NetworkManager, a laptop
    moved to another network). What cannot be compared is no proof of elsewhere: the mark's
    lock still says the demo lives."""
    def differ(key: str) -> bool | None:
        mine, its = _known(here, key), _known(there, key)
        return None if mine is None or its is None else mine != its

    host = differ("boot_id")
    if host is None:
        host = differ("hostname")
    return bool(host) or bool(differ("netns"))


class DemoMark:
    """The demo's mark, locked while this object is open; ``close`` removes it."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd = fd

    def close(self) -> None:
        if self._fd < 0:
            return
        # Removed before the lock goes: a reader never sees it unlocked while the demo lives.
        self.path.unlink(missing_ok=True)
        os.close(self._fd)
        self._fd = -1


def mark_demo_broker(folder: Path, host: str, port: int, cluster: str) -> DemoMark:
    """Say, in the demo's ``folder``, that this process runs a demo of ``cluster`` whose
    broker is at ``host:port``, and hold the mark locked until ``close``. Written to a
    temporary file, locked, then renamed into place: a reader never finds it half written,
    nor in place and unlocked."""
    import fcntl
    import json

    mark = folder / DEMO_BROKER_FILE
    tmp = folder / f".{DEMO_BROKER_FILE}.{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        # The pid is for a reader's eyes only: the lock, not the pid, says the demo lives.
        said = {"host": host, "port": port, "cluster": cluster, "pid": os.getpid(), **_where()}
        os.write(fd, (json.dumps(said) + "\n").encode())
        os.fsync(fd)
        os.replace(tmp, mark)  # the lock is the open file's: it moves with it
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    return DemoMark(mark, fd)


def _locked(mark: Path) -> bool:
    """Whether a live process holds ``mark`` locked: the demo that wrote it. A pid can be
    reused (pid 1 in a container, another user's process) and alive says nothing of the demo;
    a lock dies with the process that held it."""
    import fcntl

    try:
        fd = os.open(mark, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False  # a file system without locks: cannot tell, so not the demo
    finally:
        os.close(fd)  # drops a lock taken on a stale mark
    return False


def _same_host(asked: str, demos: str) -> bool:
    """``asked`` reaches the address the demo's broker listens on (``demos``, 127.0.0.1):
    the exact address, or ``localhost`` when every address it resolves to is that one. ``::1``
    is another socket: an ssh tunnel or a broker of the operator's own may sit on it, on the
    demo's port, and a client given ``localhost`` that resolves to ``::1`` first reaches it."""
    if asked == demos:
        return True
    if asked.lower() != "localhost":
        return False
    import socket

    try:
        found = {info[4][0] for info in socket.getaddrinfo(asked, None, type=socket.SOCK_STREAM)}
    except OSError:
        return False
    return found == {demos}


def running_demo(url: _BrokerURL, clusters: Sequence[str]) -> Path | None:
    """The folder of a demo still running whose private broker is ``url`` and whose cluster
    is every one of ``clusters``, or None. A second terminal's ``drain`` against the demo wrote
    the operator's real audit log, mixing drills with their production trail (a newcomer's
    run); a real broker must never be taken for the demo's, so what the demo's cannot be
    (TLS, a user name, client certificates) is never matched."""
    import json

    if url.tls or url.username or url.ca_file or url.cert_file or url.key_file:
        return None  # the demo's broker is plain anonymous MQTT (fleetdeck/broker.py)
    if not clusters:
        return None
    here = _where()
    try:
        marks = sorted(state_base().glob(f"demo-*/{DEMO_BROKER_FILE}"), reverse=True)
    except OSError:
        return None
    for mark in marks:
        try:
            said = json.loads(mark.read_text())
            its_port = int(said["port"])
            its_host, its_cluster = str(said["host"]), str(said["cluster"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        # No test of the pid: a demo that is a container's entrypoint runs as pid 1, and a
        # reused pid is no concern, the lock dies with the demo.
        if its_port != url.port or any(c != its_cluster for c in clusters):
            continue
        # Another host (over NFS) or another network namespace (a container sharing $HOME)
        # reached a broker of its own at that address: its real drain went to the demo's log.
        if _elsewhere(here, said):
            continue
        if not _same_host(url.host, its_host) or not _locked(mark):
            continue
        return mark.parent
    return None


def running_demo_brokers() -> list[str]:
    """The ``mqtt://host:port`` of each demo running on this host and network namespace, the
    newest first: a refused connection names them (``describe_mqtt_error``), as a newcomer
    with the demo in one terminal typed ``status`` in another without its URL, or with a port
    one digit off, and read only "connection refused (is it running?)"."""
    import json

    here = _where()
    try:
        marks = sorted(state_base().glob(f"demo-*/{DEMO_BROKER_FILE}"), reverse=True)
    except OSError:
        return []
    found: list[str] = []
    for mark in marks:
        try:
            said = json.loads(mark.read_text())
            url = f"mqtt://{said['host']}:{int(said['port'])}"
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if not _elsewhere(here, said) and _locked(mark) and url not in found:
            found.append(url)
    return found
