"""A console killed with a command open (kill -9, power loss) left its audit record at
``requested`` for ever; the next console settles it from what it hears (docs/reliability.md,
"A console killed with a command open")."""

import json
import os
import socket
import subprocess
import sys
import time

from fleetdeck.console.audit import AuditLog, AuditRecord, orphans, this_process, writer_running
from fleetdeck.console.commands import UNOWNED_AFTER_S
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.session import SETTLE_WAIT_S, ConsoleSession
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
    session.tick()
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
    session.tick()
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
        session.tick()
    assert [r["outcome"] for r in outcomes(path, rid)] == ["requested", "done"]


def test_a_node_in_service_cannot_tell_and_says_unknown(tmp_path):
    path = tmp_path / "audit.jsonl"
    rid = sent_by_a_process_now_gone(path, "gpu0001,gpu0002")
    _clock, fleet, ingest, session = restarted(path)
    session.adopt_orphans()
    fleet.birth(ingest)
    fleet.status(ingest, "gpu0001", DrainState.DRAINING, cmd_id=f"{rid}.0")
    session.tick()
    last = outcomes(path, rid)[-1]
    assert last["outcome"] == "unknown"
    assert "stopped before any answer was recorded" in last["detail"]
    assert "gpu0001 DRAINING; gpu0002 in service" in last["detail"]


def test_nodes_not_heard_are_waited_for_then_unknown(tmp_path):
    path = tmp_path / "audit.jsonl"
    rid = sent_by_a_process_now_gone(path, "gpu0003")
    clock, _fleet, _ingest, session = restarted(path)
    session.adopt_orphans()
    session.tick()  # the broker's retained statuses are not here yet: nothing said
    assert len(outcomes(path, rid)) == 1
    clock.advance(SETTLE_WAIT_S + 1)
    session.tick()
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
