"""What a node agent must remember across its own restarts: its drain and the commands it ran,
and (in a file of their own) its error windows (agents/windows.py).

A drained node whose agent restarts (systemd watchdog, upgrade, OOM kill, reboot) must come back
DRAINED with the same reason, requester and ``cmd_id``, or it silently returns to service; and a
captured signed command must not run a second time because the agent forgot it had run it. Both
live in one small JSON file in the state directory (``--state-dir``; the systemd unit's
``StateDirectory``), replaced atomically: written to a temporary file, fsynced, renamed over the
old one and the directory fsynced, so a crash at any moment leaves either the old or the new
state, never a torn one.

Without a path the state lives only in this object: the simulator hands the same object to the
next agent of a node, which is what a state directory does for a real agent.
"""

import contextlib
import errno
import fcntl
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from fleetdeck.agents.guard import EXPIRY_SKEW_MS
from fleetdeck.errors import UserError
from fleetdeck.protocol.messages import DrainInfo, DrainMode, DrainState

log = logging.getLogger("fleetdeck.agent.state")

UNREADABLE_REASON = ("agent state file was unreadable at start: drain state unknown, kept out "
                     "of service until resumed")


@dataclass(frozen=True)
class AgentState:
    drain: DrainInfo = field(default_factory=DrainInfo)
    drain_mode: DrainMode = DrainMode.FINISH
    executed: dict[str, int] = field(default_factory=dict)
    """cmd_id -> expires_at (ms) of commands acted on (replay protection), each kept
    ``EXPIRY_SKEW_MS`` past it (agents/guard.py)."""
    bd_seq: int = 0
    """The newest session number (``bdSeq``) an agent of this node used: the next agent's is
    larger even when the clock stepped back since (NTP at boot), or its will read as older
    than the last session's and the node stayed offline in every console."""


class _StateFile(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)

    v: Literal[1] = 1
    node: str = ""
    drain: DrainInfo = DrainInfo()
    drain_mode: DrainMode = DrainMode.FINISH
    executed: dict[str, int] = {}
    bd_seq: int = 0


def usable_state_dir(path: Path) -> Path:
    """``--state-dir``, made if missing; one sentence if it cannot be used."""
    # Said as what to fix: "File exists." of a path that is a file, and "not writable by
    # this user" to root on a read-only mount, sent the operator looking (a 2026-12-07 drill).
    keeps = "the agent keeps its drain state, command ids and lock there"
    if path.exists() and not path.is_dir():
        raise UserError(f"--state-dir {path} is a file, not a directory ({keeps}): give it a "
                        "directory.")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        file = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
        if file is not None:
            raise UserError(f"--state-dir {path}: {err.strerror} ({file} is a file).") from None
        raise UserError(f"--state-dir {path}: {err.strerror}.") from None
    with contextlib.suppress(OSError):
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            raise UserError(f"--state-dir {path} is on a read-only file system ({keeps}): "
                            "give it a writable directory.")
    if not os.access(path, os.W_OK | os.X_OK):
        raise UserError(f"--state-dir {path}: not writable by this user.")
    return path


def hold_node_lock(state_dir: Path, node_id: str) -> int | None:
    """Lock the node's files in ``state_dir`` for this agent process (released when it exits,
    however it ends); the lock file's descriptor, to close when the agent is done. A second
    agent of the node on the same directory (a hand-started one beside the systemd unit) is
    refused in one sentence: the two took the MQTT session from each other (H3 in every
    console), and both wrote the state and outbox through one temporary file name, where a
    torn state file fails the node safe to drained.

    None, with a warning, where no lock can be had though none is held: a directory whose
    locks fail (NFS without its lock daemon: ENOLCK) or a lock file this user cannot open
    (left by an agent run by hand as root). The agent runs unguarded then, as an unwritable
    state file lets it (docs/real-nodes.md): an agent that would not start for its guard left
    the node unwatched and undrainable, where the guard only stops a mistake."""
    path = usable_state_dir(state_dir) / f"state-{node_id}.lock"
    fd = _hold_node_lock_at(path, state_dir, node_id)
    if fd is not None:
        _node_locks[path] = (fd, state_dir, node_id)
    return fd


def _hold_node_lock_at(path: Path, state_dir: Path, node_id: str) -> int | None:
    return _hold_lock(
        path, "one-agent-per-node", "agent of this node",
        lambda pid: f"another agent for {node_id} is running on --state-dir {state_dir}{pid}: "
        "two agents of one node take its MQTT session from each other and overwrite each "
        "other's drain state; stop that one first.")


_node_locks: dict[Path, tuple[int, Path, str]] = {}
"""The node locks this process holds (``hold_node_lock``), by lock file: taken again where the
file is gone (``keep_node_locks``)."""


def release_node_lock(fd: int) -> None:
    """Let go of a lock ``hold_node_lock`` took (at the agent's end)."""
    for path, (held, _dir, _node) in list(_node_locks.items()):
        if held == fd:
            del _node_locks[path]
    os.close(fd)


def keep_node_locks() -> None:
    """Each node lock held, taken again where its file no longer is the one locked: its state
    directory removed (``rm -rf``, a tmpfiles clean-up; made again here), or the file. The
    lock went with the directory, and a second agent of the node started then was accepted
    until this one restarted (a 2026-12-07 drill; docs/reliability.md). Called when a save
    makes the directory again, and every few seconds by the agent (``agents/run.py``), so a
    directory nothing is saved into is remade before a second agent can make its own."""
    for path, (fd, state_dir, node_id) in list(_node_locks.items()):
        try:
            now, held = os.stat(path), os.fstat(fd)
            if (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
                continue
        except FileNotFoundError:
            if not path.parent.exists() and not remake_removed_dir(path, relock=False):
                continue
        except OSError:
            continue
        try:
            new = _hold_node_lock_at(path, state_dir, node_id)
        except UserError as err:
            # Another agent took it in the meantime: this one cannot stop it, only say so.
            log.error("the lock against a second agent of %s was gone with its file; another "
                      "agent holds it now: %s", node_id, err)
            del _node_locks[path]
            continue
        if new is None:
            continue  # said by _unguarded
        # Onto the number the agent holds: the lock's open file moves there, the old one's
        # (of the removed file) closes.
        os.dup2(new, fd)
        os.close(new)
        log.warning("took the lock against a second agent of %s again in %s", node_id, path)


def hold_sim_lock(state_dir: Path, cluster: str, prefix: str, shown: Path) -> int | None:
    """``hold_node_lock`` for ``fleetdeck sim --state-dir``: one lock for the simulator's
    nodes (``state_dir`` is the cluster's own directory, ``shown`` the --state-dir as given),
    taken by the process started and inherited by a spread fleet's workers (``--procs``,
    agents/fleet.py ``run_spread``), so that it lasts while any of them runs. One lock, not
    one a node: each simulated node holds an MQTT socket already, and a lock each would
    double the descriptors of a 16,384-node fleet. Its nodes are ``<prefix>0001`` on
    (agents/sim/topology.py ``node_names``), so any two simulators of one prefix share nodes
    and one of another prefix shares none (a fleet spread over machines, one ``--prefix``
    each, may share one directory)."""
    return _hold_lock(
        state_dir / f"sim-{prefix}.lock", "one-simulator-per-state-directory",
        f"simulator of {prefix} nodes",
        lambda pid: f"another simulator of {prefix} nodes on cluster '{cluster}' is running "
        f"on --state-dir {shown}{pid}: two simulators of one fleet take its nodes' MQTT "
        "sessions from each other and overwrite each other's drain state; stop that one "
        "first.")


def _hold_lock(path: Path, guard: str, second: str,
               refusal: Callable[[str], str]) -> int | None:
    """``path`` locked for this process, the lock file's descriptor; ``refusal(pid)``: the
    sentence when another process holds it (``pid`` " (pid N)" or ""). ``guard`` and
    ``second`` name the guard in the warning when it cannot be had (``_unguarded``)."""
    writable = True
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except PermissionError:
        # Another user's file (a root-run agent's): a lock needs no write access, the pid does.
        writable = False
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as err:
            _unguarded(path, err, guard, second)
            return None
    except OSError as err:
        _unguarded(path, err, guard, second)
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            os.close(fd)
            _unguarded(path, err, guard, second)
            return None
        holder = os.pread(fd, 16, 0).decode(errors="replace").strip()
        os.close(fd)
        if holder.isdigit() and process_state(int(holder)) in STUCK_STATES:
            # A killed agent with a thread in a wedged GPU driver call cannot exit, and holds
            # its descriptors until the call returns (maybe never): refused, each restart of
            # the unit exited 2 and the node read offline, where an agent beside it still
            # says what it can (its readers time out: docs/real-nodes.md).
            log.warning("%s is held by pid %s, stuck in the kernel (a wedged driver call?) and "
                        "unable to exit: running beside it, unguarded", path, holder)
            return None
        pid = f" (pid {holder})" if holder.isdigit() else ""
        raise UserError(refusal(pid)) from None
    if writable:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


STUCK_STATES = frozenset("DZ")
"""/proc states of a process that cannot act (uninterruptible sleep, dying) though it still
holds a lock: proc(5), ``/proc/PID/stat`` field 3."""


def process_state(pid: int) -> str:
    """``pid``'s state letter from /proc (proc(5)); "" when it cannot be read."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return ""
    # The command name, in parentheses, may itself hold spaces or ')'.
    rest = raw[raw.rfind(b")") + 1:].split()
    return rest[0].decode(errors="replace") if rest else ""


def _unguarded(path: Path, err: OSError, guard: str, second: str) -> None:
    log.warning("cannot lock %s (%s): running without the %s guard; a second %s on this "
                "state directory will not be refused", path, err.strerror or err, guard, second)


def state_file(state_dir: Path, node_id: str) -> Path:
    """A node's state file: one name for a real agent and a simulated one."""
    return state_dir / f"state-{node_id}.json"


def kept_drain(path: Path) -> DrainState:
    """The drain a node's agent will restore from its state file, read without touching the
    file (``StateStore.load`` moves a damaged one aside): a damaged one is drained, as
    ``load`` makes it. For the processes of a spread simulator that do not run the node's
    agent (agents/fleet.py)."""
    try:
        return _StateFile.model_validate_json(path.read_bytes()).drain.state
    except FileNotFoundError:
        return DrainState.NONE
    except (OSError, ValidationError):
        return DrainState.DRAINED


class StateStore:
    def __init__(self, path: Path | None = None, node_id: str = "",
                 durable: bool = True) -> None:
        self.path = path
        self.node_id = node_id
        self.durable = durable
        """Each save fsynced (a real node's power cut keeps its drain). A simulator's are only
        renamed into place: an agent saves at every session start, and 4,096 fsynced saves,
        ~1.3 ms each, held the simulator's loop ~5 s at start-up and after every broker
        restart (a review)."""
        self._memory = AgentState()
        self._windows: object = None
        self._windows_failing = False
        self._failing = False
        self.save_error = ""
        """Why the last save of the state failed ('' once one worked): the disk's words."""
        self.kept_drain: DrainInfo | None = None
        """The drain the state file holds (read or last written; None: not known), what a
        restart comes back with while saves fail."""
        self.lost = False
        """The file existed but could not be read by :meth:`load` (:data:`UNREADABLE_REASON`)."""

    def load(self, now_ms: int) -> AgentState:
        """The state saved last (expired command ids dropped); an empty one on a first start."""
        state = self._memory if self.path is None else self._read(self.path, now_ms)
        return AgentState(state.drain, state.drain_mode,
                          {k: v for k, v in state.executed.items()
                           if v + EXPIRY_SKEW_MS >= now_ms},
                          state.bd_seq)

    def _read(self, path: Path, now_ms: int) -> AgentState:
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            self.kept_drain = DrainInfo()
            return AgentState()
        try:
            f = _StateFile.model_validate_json(raw)
        except ValidationError as err:
            # Only a damaged disk or a hand edit gets here (writes are atomic). Not knowing
            # whether the node was drained, fail safe: out of service until an operator resumes
            # it, and keep the bad file for a post-mortem.
            bad = path.with_name(path.name + ".unreadable")
            with contextlib.suppress(OSError):
                os.replace(path, bad)
            log.error("%s: %s (%s); kept as %s", path, UNREADABLE_REASON,
                      str(err).splitlines()[0], bad)
            self.lost = True
            lost = AgentState(DrainInfo(state=DrainState.DRAINED, reason=UNREADABLE_REASON,
                                        requested_by="agent", since_ts=now_ms))
            self.save(lost)
            return lost
        self.kept_drain = f.drain
        return AgentState(f.drain, f.drain_mode, dict(f.executed), f.bd_seq)

    def save(self, state: AgentState) -> bool:
        """Keep ``state``; False (and an error logged once) if the disk refused it."""
        self._memory = AgentState(state.drain, state.drain_mode, dict(state.executed),
                                  state.bd_seq)
        if self.path is None:
            return True
        body = _StateFile(node=self.node_id, drain=state.drain, drain_mode=state.drain_mode,
                          executed=state.executed, bd_seq=state.bd_seq,
                          ).model_dump_json(exclude_none=True).encode()
        try:
            write_remaking(self.path, body, self.durable)
        except OSError as err:
            if not self._failing:
                log.error("cannot save agent state to %s: %s; a drain will not survive an "
                          "agent restart until this is fixed", self.path, err.strerror or err)
            self._failing = True
            self.save_error = f"{self.path}: {err.strerror or err}"
            return False
        if self._failing:
            log.warning("agent state saved to %s again", self.path)
        self._failing = False
        self.save_error = ""
        self.kept_drain = state.drain
        return True


    @property
    def windows_path(self) -> Path | None:
        """The error windows' own file beside the state's: a damaged one costs the windows
        only, never the drain (``load`` fails safe to drained)."""
        return None if self.path is None else self.path.with_suffix(".windows.json")

    def load_windows(self) -> object:
        """The error windows an earlier agent of this node saved (agents/windows.py), or None."""
        path = self.windows_path
        if path is None:
            return self._windows
        try:
            return json.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as err:
            log.warning("%s: cannot read the saved error windows (%s); they start empty",
                        path, err)
            return None

    def save_windows(self, snapshot: object) -> bool:
        """Keep the error windows; False (and an error logged once) if the disk refused."""
        self._windows = snapshot
        path = self.windows_path
        if path is None:
            return True
        try:
            write_remaking(path, json.dumps(snapshot, separators=(",", ":")).encode(),
                           self.durable)
        except OSError as err:
            if not self._windows_failing:
                log.error("cannot save the error windows to %s: %s; an agent restart will "
                          "forget the last hour's IB errors", path, err.strerror or err)
            self._windows_failing = True
            return False
        self._windows_failing = False
        return True


def remake_removed_dir(path: Path, relock: bool = True) -> bool:
    """Make ``path``'s folder again if it was removed while the agent ran (an ``rm -rf`` of the
    state directory, a tmpfiles clean-up); True if it did. Without it every later save failed
    for the rest of the agent's life, and the drain it had just acknowledged read "in service"
    after its next restart (a 2026-12-07 drill)."""
    folder = path.parent
    if folder.exists():
        return False
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    log.warning("the state directory %s was removed while the agent ran: made it again; what "
                "was saved there before (the executed command ids, the error windows) is "
                "gone, what is saved from now on is kept", folder)
    if relock:
        keep_node_locks()
    return True


def write_remaking(path: Path, body: bytes, durable: bool = True) -> None:
    """:func:`write_atomically`, into its folder made again if it was removed meanwhile."""
    try:
        write_atomically(path, body, durable)
    except FileNotFoundError:
        if not remake_removed_dir(path):
            raise
        write_atomically(path, body, durable)


def write_atomically(path: Path, body: bytes, durable: bool = True) -> None:
    """Replace ``path`` with ``body`` whole (a crash leaves the old or the new); ``durable``:
    on disk too, before and after the rename."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(body)
        if durable:
            fh.flush()
            os.fsync(fh.fileno())
    os.replace(tmp, path)
    if not durable:
        return
    # The rename itself is durable only once the directory entry is on disk.
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
