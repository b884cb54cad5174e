"""A console killed with a command open (kill -9, power loss) left its audit record at
``requested`` for ever; the next console settles it from what it hears (docs/reliability.md,
"A console killed with a command open")."""

import asyncio
import errno
import fcntl
import json
import os
import socket
import subprocess
import sys
import threading
import time

import fleetdeck.console.audit as audit_mod
from fleetdeck.console.audit import (
    AuditLog,
    AuditRecord,
    MemoryAudit,
    TeeAudit,
    orphans,
    this_process,
    writer_running,
)
from fleetdeck.console.commands import UNOWNED_AFTER_S
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.orphan_settler import SETTLE_WAIT_S
from fleetdeck.console.session import ConsoleSession
from fleetdeck.protocol.messages import DrainState
from tests.conftest import REPO
from tests.tui.fleet import CLUSTER, Clock, SynthFleet

SEND = """
import sys
from fleetdeck.console.audit import AuditLog
from fleetdeck.console.session import ConsoleSession
s = ConsoleSession({cluster!r}, audit=AuditLog(sys.argv[1]), operator="erin")
req = s.drain(sys.argv[2].split(","), "bad DIMM OPS-7")
print(req.request_id)
"""


def sent_by_a_process_now_gone(path, nodes: str) -> str:
    """A drain audited ``requested`` by another process, which then ends without an outcome
    (as a SIGKILLed console does): its request id."""
    out = subprocess.run([sys.executable, "-c", SEND.format(cluster=CLUSTER), str(path), nodes],
                         capture_output=True, text=True, check=True, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    return out.stdout.strip()


def restarted(path, n: int = 4) -> tuple[Clock, SynthFleet, Ingest, ConsoleSession]:
    clock = Clock(time.time())
    fleet = SynthFleet(n, clock)
    ingest = Ingest(CLUSTER)
    session = ConsoleSession(CLUSTER, clock=clock, ingest=ingest, follow_up=False,
                             audit=AuditLog(path), operator="frank")
    return clock, fleet, ingest, session


def outcomes(path, rid: str) -> list[dict]:
    return [r for r in AuditLog(path).read() if r["request_id"] == rid]


def tick(session: ConsoleSession) -> None:
    """A tick, and the I/O pump's flush after it: settlements are written off the event loop."""
    session.tick()
    asyncio.run(session.flush())


def past_deadline(clock: Clock) -> None:
    """Past the command's own deadline (a drain that lets its job finish: 10 s to be
    acknowledged): it can no longer land."""
    clock.advance(UNOWNED_AFTER_S + 1)


def test_every_record_names_the_process_that_wrote_it(tmp_path):
    log = AuditLog(tmp_path / "audit.jsonl")
    log.write(AuditRecord(ts=0, who="a", what="drain", targets="n", why="w",
                          outcome="requested", request_id="c"))
    writer = log.read()[0]["writer"]
    assert writer["pid"] == os.getpid() and writer["host"] == socket.gethostname()
    assert writer_running(writer) is True
    assert writer_running({**writer, "host": "elsewhere"}) is None  # cannot tell: left alone
    assert writer_running(None) is None


def test_a_drain_seen_draining_is_settled_done_once(tmp_path):
    path = tmp_path / "audit.jsonl"
    rid = sent_by_a_process_now_gone(path, "gpu0001")
    clock, fleet, ingest, session = restarted(path)
    assert session.adopt_orphans() == 1
    fleet.birth(ingest)
    fleet.status(ingest, "gpu0001", DrainState.DRAINING, "bad DIMM OPS-7", "erin",
                 cmd_id=f"{rid}.0")
    tick(session)
    recs = outcomes(path, rid)
    assert [r["outcome"] for r in recs] == ["requested", "done"]
    done = recs[-1]
    assert done["who"] == "erin" and done["why"] == "bad DIMM OPS-7"
    assert "seen after the process" not in done["detail"]  # its writer is named
    assert "stopped: gpu0001 DRAINING" in done["detail"]
    assert done["writer"]["pid"] == os.getpid()  # who settled it
    assert any(f"[{rid}]: done (seen after" in line.text for _n, line in session.log)
    # A second console on the same log (or this one again) finds nothing left to settle.
    *_rest, other = restarted(path)
    assert other.adopt_orphans() == 0
    clock.advance(1)
    tick(session)
    assert len(outcomes(path, rid)) == 2


def test_two_consoles_that_both_found_it_write_one_outcome(tmp_path):
    path = tmp_path / "audit.jsonl"
    rid = sent_by_a_process_now_gone(path, "gpu0002")
    consoles = [restarted(path) for _ in range(2)]
    for _clock, fleet, ingest, session in consoles:
        assert session.adopt_orphans() == 1
        fleet.birth(ingest)
        fleet.status(ingest, "gpu0002", DrainState.DRAINED, "bad DIMM OPS-7", "erin",
                     cmd_id=f"{rid}.0")
    for *_rest, session in consoles:
        tick(session)
    assert [r["outcome"] for r in outcomes(path, rid)] == ["requested", "done"]


def test_a_node_in_service_cannot_tell_and_says_unknown(tmp_path):
    path = tmp_path / "audit.jsonl"
    rid = sent_by_a_process_now_gone(path, "gpu0001,gpu0002")
    clock, fleet, ingest, session = restarted(path)
    session.adopt_orphans()
    fleet.birth(ingest)
    fleet.status(ingest, "gpu0001", DrainState.DRAINING, cmd_id=f"{rid}.0")
    tick(session)
    assert len(outcomes(path, rid)) == 1  # it may still land: not "unknown" yet
    past_deadline(clock)
    tick(session)
    last = outcomes(path, rid)[-1]
    assert last["outcome"] == "unknown"
    assert "stopped before any answer was recorded" in last["detail"]
    assert "gpu0001 DRAINING; gpu0002 in service" in last["detail"]


def test_nodes_not_heard_are_waited_for_then_unknown(tmp_path):
    path = tmp_path / "audit.jsonl"
    rid = sent_by_a_process_now_gone(path, "gpu0003")
    clock, _fleet, _ingest, session = restarted(path)
    session.adopt_orphans()
    tick(session)  # the broker's retained statuses are not here yet: nothing said
    assert len(outcomes(path, rid)) == 1
    clock.advance(SETTLE_WAIT_S + 1)  # past its deadline too (10 s to be acknowledged)
    tick(session)
    last = outcomes(path, rid)[-1]
    assert last["outcome"] == "unknown" and "gpu0003 not heard" in last["detail"]


def test_a_running_writer_s_command_is_left_to_it(tmp_path):
    path = tmp_path / "audit.jsonl"
    live = ConsoleSession(CLUSTER, audit=AuditLog(path), operator="erin")
    live.drain(["gpu0001"], "bad DIMM")  # this process runs: it still follows it
    *_rest, session = restarted(path)
    assert session.adopt_orphans() == 0


def test_records_from_before_writers_were_named_count_once_past_their_deadline(tmp_path):
    now = time.time()
    old = {"ts": now - UNOWNED_AFTER_S - 1, "request_id": "old", "outcome": "requested",
           "cluster": CLUSTER}
    young = {**old, "ts": now - 5, "request_id": "young"}
    other = {**old, "request_id": "other", "cluster": "elsewhere"}
    found = orphans([old, young, other], CLUSTER, now, UNOWNED_AFTER_S)
    assert [r["request_id"] for r in found] == ["old"]
    # A settled one (any outcome after it) is closed.
    closed = {**old, "outcome": "unknown", "writer": this_process()}
    assert orphans([old, closed], CLUSTER, now, UNOWNED_AFTER_S) == []


def test_a_record_of_a_reused_pid_is_not_its_writer(tmp_path):
    me = this_process()
    if not me["started"]:
        return  # no /proc here: the pid alone says it
    assert writer_running({**me, "started": str(int(me["started"]) + 1)}) is False
    assert json.loads(json.dumps(me)) == me


def test_a_writer_in_another_pid_namespace_is_left_to_a_console_there(tmp_path):
    """A container with the host's network (or a pod) shares the hostname, not the process
    table: its live drain's pid is not found here, and it was settled as an orphan while it
    still followed it, two outcomes (a review)."""
    path = tmp_path / "audit.jsonl"
    sent_by_a_process_now_gone(path, "gpu0001")
    [rec] = AuditLog(path).read()
    assert rec["writer"]["pidns"] == os.readlink("/proc/self/ns/pid")
    assert writer_running({**this_process(), "pidns": "pid:[1]"}) is None
    rec["writer"]["pidns"] = "pid:[4026532999]"  # written in a container
    path.write_text(json.dumps(rec) + "\n")
    *_rest, session = restarted(path)
    assert session.adopt_orphans() == 0


def test_a_writer_on_a_host_since_rebooted_is_not_running(monkeypatch):
    """A writer in the host's own pid namespace (or a record naming none) on another boot: the
    host rebooted, nothing of then runs, and its command is settled (a review)."""
    me = this_process()
    if not me["boot"]:
        return  # no /proc here: the boot cannot be told
    other_boot = "00000000-dead-beef-0000-000000000000"
    for ours in (audit_mod.INIT_PIDNS, "pid:[4026532100]"):  # this console on the host, or not
        monkeypatch.setattr(audit_mod, "_pid_namespace", lambda ours=ours: ours)
        gone = {**me, "pidns": audit_mod.INIT_PIDNS, "boot": other_boot}
        assert writer_running(gone) is False
        named_none = {k: v for k, v in gone.items() if k != "pidns"}
        assert writer_running(named_none) is False
        now = time.time()
        rec = {"cluster": CLUSTER, "request_id": "r1", "outcome": "requested",
               "ts": now - 3600, "what": "drain", "targets": "gpu0001", "writer": gone,
               "args": {"deadline_s": "10"}}
        assert [r["request_id"] for r in orphans([rec], CLUSTER, now, UNOWNED_AFTER_S)] == [
            "r1"]


def test_a_container_of_the_same_hostname_on_another_host_is_left_alone(monkeypatch):
    """Two containers of one hostname on two hosts (a pod's name), one audit log on NFS: each
    has another boot id, and each settled the other's live drain as an orphan, two outcomes (a
    review). A container's writer of another boot cannot be told from here: left alone, at the
    cost of a command killed by a reboot of its own host staying `requested`."""
    me = this_process()
    if not me["boot"]:
        return
    theirs = "pid:[4026532100]"
    elsewhere = {**me, "pidns": theirs, "boot": "00000000-dead-beef-0000-000000000000"}
    for ours in (theirs, "pid:[4026532200]", audit_mod.INIT_PIDNS):
        monkeypatch.setattr(audit_mod, "_pid_namespace", lambda ours=ours: ours)
        assert writer_running(elsewhere) is None, ours
        now = time.time()
        rec = {"cluster": CLUSTER, "request_id": "r1", "outcome": "requested",
               "ts": now - 3600, "what": "drain", "targets": "gpu0001", "writer": elsewhere,
               "args": {"deadline_s": "10"}}
        assert orphans([rec], CLUSTER, now, UNOWNED_AFTER_S) == [], ours
    # The same boot, another namespace: its pids are not this one's to look up.
    monkeypatch.setattr(audit_mod, "_pid_namespace", lambda: "pid:[4026532200]")
    assert writer_running({**me, "pidns": theirs}) is None


_flock = fcntl.flock


def nfs_flock(fd, op):
    """flock(2) as on NFS: an exclusive lock wants the file open for writing."""
    if op & fcntl.LOCK_EX and not (fcntl.fcntl(fd, fcntl.F_GETFL) & (os.O_WRONLY | os.O_RDWR)):
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))
    return _flock(fd, op)


def test_a_log_on_nfs_is_locked_and_settled(tmp_path, monkeypatch):
    """On NFS the lock on a read-only descriptor failed with EBADF, uncaught: the console's
    tick (or `fleetdeck drain`, its own request left open) died with a traceback (a review)."""
    path = tmp_path / "audit.jsonl"
    rid = sent_by_a_process_now_gone(path, "gpu0001")
    _clock, fleet, ingest, session = restarted(path)
    session.adopt_orphans()
    fleet.birth(ingest)
    fleet.status(ingest, "gpu0001", DrainState.DRAINING, cmd_id=f"{rid}.0")
    monkeypatch.setattr(audit_mod.fcntl, "flock", nfs_flock)
    tick(session)
    assert [r["outcome"] for r in outcomes(path, rid)] == ["requested", "done"]


def test_a_log_that_cannot_be_locked_is_left_as_it_is_said_once(tmp_path, monkeypatch):
    path = tmp_path / "audit.jsonl"
    rid = sent_by_a_process_now_gone(path, "gpu0001")
    clock, fleet, ingest, session = restarted(path)
    session.adopt_orphans()
    fleet.birth(ingest)
    fleet.status(ingest, "gpu0001", DrainState.DRAINING, cmd_id=f"{rid}.0")

    def no_lock(fd, op):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(audit_mod.fcntl, "flock", no_lock)
    for _ in range(3):
        tick(session)  # never raised
        clock.advance(1)
    assert [r["outcome"] for r in outcomes(path, rid)] == ["requested"]
    said = [line.text for _n, line in session.log if "cannot lock audit log" in line.text]
    assert len(said) == 1 and "left as they are" in said[0], said


def test_a_log_that_cannot_be_read_is_said_in_the_timeline(tmp_path, monkeypatch):
    """With no orphans found nothing is settled: the error set for a settlement to say was
    never shown (a review)."""
    path = tmp_path / "audit.jsonl"
    sent_by_a_process_now_gone(path, "gpu0001")

    def no_read(self, *args, **kwargs):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(AuditLog, "tail", no_read)
    clock, _fleet, _ingest, session = restarted(path)
    assert session.adopt_orphans() == 0  # never raised
    for _ in range(3):
        tick(session)
        clock.advance(1)
    said = [line.text for _n, line in session.log if "cannot read audit log" in line.text]
    assert len(said) == 1 and os.strerror(errno.EIO) in said[0], said


def test_a_settlement_whose_pump_is_cancelled_at_stop_reaches_the_store_and_timeline(
        tmp_path, monkeypatch):
    """The I/O pump cancelled at stop while the settling thread ran: the file got the outcome,
    the store's copy and the timeline's line were lost, and the close's flush found it settled
    already (a review)."""
    path = tmp_path / "audit.jsonl"
    rid = sent_by_a_process_now_gone(path, "gpu0001")
    clock = Clock(time.time())
    fleet = SynthFleet(4, clock)
    ingest = Ingest(CLUSTER)
    store = MemoryAudit()  # the store's sink, beside the file
    session = ConsoleSession(CLUSTER, clock=clock, ingest=ingest, follow_up=False,
                             audit=TeeAudit(AuditLog(path), store), operator="frank")
    session.adopt_orphans()
    fleet.birth(ingest)
    fleet.status(ingest, "gpu0001", DrainState.DRAINING, cmd_id=f"{rid}.0")
    session.tick()
    entered, release = threading.Event(), threading.Event()
    settle = AuditLog.settle

    def slow(self, *args):
        entered.set()
        release.wait(10)
        return settle(self, *args)

    monkeypatch.setattr(AuditLog, "settle", slow)

    async def stop_while_settling() -> None:
        pump = asyncio.create_task(session.flush())
        await asyncio.to_thread(entered.wait, 10)
        pump.cancel()
        await asyncio.sleep(0.05)
        release.set()
        await asyncio.gather(pump, return_exceptions=True)
        await session.flush()  # the close's own

    asyncio.run(stop_while_settling())
    assert [r["outcome"] for r in outcomes(path, rid)] == ["requested", "done"]
    assert [(r.request_id, r.outcome) for r in store.records] == [(rid, "done")]
    said = [line.text for _n, line in session.log if "gpu0001" in line.text]
    assert len(said) == 1, said


def test_a_settlement_written_while_the_store_opens_reaches_the_store(tmp_path, monkeypatch):
    """The TUI starts a session whose store is slow to open after ``STORE_WAIT_S``: a store
    opened while the settling thread ran must get its copy of the outcome, as the session's
    audit sinks stand once the file is written (``OrphanSettler.write``), not as they stood
    when the write began."""
    path = tmp_path / "audit.jsonl"
    rid = sent_by_a_process_now_gone(path, "gpu0001")
    _clock, fleet, ingest, session = restarted(path)
    session.adopt_orphans()
    fleet.birth(ingest)
    fleet.status(ingest, "gpu0001", DrainState.DRAINING, cmd_id=f"{rid}.0")
    session.tick()
    entered, release = threading.Event(), threading.Event()
    settle = AuditLog.settle

    def slow(self, *args):
        entered.set()
        release.wait(10)
        return settle(self, *args)

    monkeypatch.setattr(AuditLog, "settle", slow)

    async def store_opened_while_settling() -> list[tuple[str, str]]:
        pump = asyncio.create_task(session.flush())
        await asyncio.to_thread(entered.wait, 10)
        await session.open_store(tmp_path / "fleet.db")
        release.set()
        await pump
        session.tick()  # the store writes what it was given with a tick's rows
        await session.flush()
        assert session.store is not None
        rows = await session.store.audit_rows(0)
        await session.close()
        return [(r["request_id"], r["outcome"]) for r in rows]

    assert asyncio.run(store_opened_while_settling()) == [(rid, "done")]
    assert [r["outcome"] for r in outcomes(path, rid)] == ["requested", "done"]


def test_a_drain_of_128_nodes_is_matched_by_its_request_not_its_cut_cmd_ids(tmp_path):
    """``cmd_ids`` is cut at 2,000 characters: the nodes past ~90 read 'DRAINING by another
    drain' and a drain that took effect everywhere was settled unknown (a review)."""
    path = tmp_path / "audit.jsonl"
    nodes = [f"gpu{i:04d}" for i in range(1, 129)]
    rid = sent_by_a_process_now_gone(path, ",".join(nodes))
    assert len(AuditLog(path).read()[0]["args"]["cmd_ids"].split(",")) < 128
    _clock, fleet, ingest, session = restarted(path, 128)
    session.adopt_orphans()
    fleet.birth(ingest)
    for i, n in enumerate(nodes):
        fleet.status(ingest, n, DrainState.DRAINING, "bad DIMM OPS-7", "erin",
                     cmd_id=f"{rid}.{i}")
    tick(session)
    last = outcomes(path, rid)[-1]
    assert last["outcome"] == "done", last["detail"][-300:]
    assert "another drain" not in last["detail"]


def _record(rid: str, ts: float, outcome: str, detail: str = "", writer=None) -> dict:
    gone = {**this_process(), "pid": 2**22 + 7, "started": "1"}  # no such process
    return {"ts": ts, "who": "erin", "what": "drain", "targets": "gpu0001", "why": "bad DIMM",
            "request_id": rid, "cluster": CLUSTER, "outcome": outcome, "detail": detail,
            "args": {"cmd_ids": f"{rid}.0", "deadline_s": "70"},
            "writer": writer if writer is not None else gone}


def test_no_wait_acknowledged_and_old_records_are_not_settled():
    """`--no-wait` leaves its request acknowledged (the agent answered) or requested, saying
    so: the operator chose not to wait, there is nothing to settle. Older than a week, a
    request is history: the nodes now say nothing of it. A 50 MB log got 4,094 `unknown`
    records and as many timeline warnings for these (a review)."""
    now = time.time()
    recs = [_record("acked", now - 600, "requested"),
            _record("acked", now - 599, "acknowledged", "not waiting for the effect (--no-wait)"),
            _record("nowait", now - 600, "requested", "not waiting for the effect (--no-wait): "
                    "gpu0001 requested"),
            _record("ancient", now - 8 * 86400, "requested"),
            _record("open", now - 600, "requested")]
    assert [r["request_id"] for r in orphans(recs, CLUSTER, now, UNOWNED_AFTER_S)] == ["open"]


def test_a_fresh_no_wait_drain_is_not_settled_by_the_next_command(tmp_path):
    """`drain --no-wait` then at once another command: the first was settled `unknown` before
    it landed (a review)."""
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    now = time.time()
    with path.open("a") as fh:
        for rec in (_record("nw", now - 1, "requested"),
                    _record("nw", now - 0.5, "requested",
                            "not waiting for the effect (--no-wait): gpu0001 requested")):
            fh.write(json.dumps(rec) + "\n")
    *_rest, session = restarted(path)
    assert session.adopt_orphans() == 0
    assert [r["outcome"] for r in log.read()] == ["requested", "requested"]


def test_a_big_log_is_read_from_its_end_and_settled_in_one_line(tmp_path):
    """A 50 MB log was read whole, twice, on the event loop (1.2 s + 1.7 s, 344 MB), and each
    settlement was a line in the timeline (a review): the end of the log is read, off the
    loop, and the timeline says them in one line."""
    path = tmp_path / "audit.jsonl"
    now = time.time()
    filler = json.dumps(_record("filler", now - 3600, "done")) + "\n"
    with path.open("w") as fh:
        # An open request long before the end: past what is read, it is not found.
        fh.write(json.dumps(_record("buried", now - 3600, "requested")) + "\n")
        fh.write(filler * (audit_mod.TAIL_BYTES // len(filler) + 10))
        for i in range(7):
            fh.write(json.dumps(_record(f"open{i}", now - 600, "requested")) + "\n")
    _clock, fleet, ingest, session = restarted(path)
    assert session.adopt_orphans() == 7
    fleet.birth(ingest)
    tick(session)
    settled = [r for r in AuditLog(path).tail() if r["outcome"] == "unknown"]
    assert sorted(r["request_id"] for r in settled) == [f"open{i}" for i in range(7)]
    lines = [line.text for _n, line in session.log if "open" in line.text]
    assert len(lines) == 1, lines
    assert lines[0].startswith("settled 7 commands left open by consoles that stopped (7 "
                               "unknown; each in the audit log): drain gpu0001 [open0]: "
                               "unknown;"), lines[0]
    assert lines[0].endswith("; and 2 more")


def test_settling_does_not_wait_for_another_console_s_lock(tmp_path):
    """The lock is tried, not waited for on the event loop: held by another console, the
    settlement is written at a later flush."""
    path = tmp_path / "audit.jsonl"
    rid = sent_by_a_process_now_gone(path, "gpu0001")
    clock, fleet, ingest, session = restarted(path)
    session.adopt_orphans()
    fleet.birth(ingest)
    fleet.status(ingest, "gpu0001", DrainState.DRAINING, cmd_id=f"{rid}.0")
    other = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        fcntl.flock(other, fcntl.LOCK_EX)
        flushing = threading.Thread(target=tick, args=(session,), daemon=True)
        flushing.start()
        flushing.join(2.0)
        assert not flushing.is_alive(), "the flush waited for the other console's lock"
        assert len(outcomes(path, rid)) == 1
    finally:
        os.close(other)
    clock.advance(1)
    tick(session)
    assert [r["outcome"] for r in outcomes(path, rid)] == ["requested", "done"]


def test_a_settlement_decided_by_the_last_tick_is_written_at_close(tmp_path):
    """A one-shot command may end on the tick that decided it: written by its close."""
    path = tmp_path / "audit.jsonl"
    rid = sent_by_a_process_now_gone(path, "gpu0001")
    _clock, fleet, ingest, session = restarted(path)
    session.adopt_orphans()
    fleet.birth(ingest)
    fleet.status(ingest, "gpu0001", DrainState.DRAINING, cmd_id=f"{rid}.0")
    session.tick()
    asyncio.run(session.close())
    assert [r["outcome"] for r in outcomes(path, rid)] == ["requested", "done"]
