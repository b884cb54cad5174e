"""Hostile and broken publishers against a real broker: counted, reported, never fatal."""

import asyncio
import json
import subprocess
import time

import aiomqtt
import pytest

from fleetdeck.console.ingest import Ingest
from fleetdeck.console.live import LiveFeed
from fleetdeck.console.state import FleetState
from fleetdeck.protocol.topics import ROOT, Kind
from tests.conftest import eventually, fleetdeck_cmd, spawn, stop_process, subscribers

CLUSTER = "bad"
BASE = f"{ROOT}/{CLUSTER}"

VALID_TELEMETRY = {"v": 1, "node": "gpu0001", "seq": 99999, "bdSeq": 1, "ts": 1,
                   "gpus": [{"index": 0, "util_pct": 1.0}]}

BAD_MESSAGES: list[tuple[str, bytes, str]] = [
    (f"{BASE}/node/gpu0001/telemetry", b"{this is not json", "not_json"),
    (f"{BASE}/node/gpu0001/telemetry", b"\x00\xff\xfe binary", "not_json"),
    (f"{BASE}/node/gpu0001/telemetry",
     json.dumps({**VALID_TELEMETRY, "seq": "7"}).encode(), "invalid"),
    (f"{BASE}/node/gpu0001/status", json.dumps({"v": 1, "node": "gpu0001", "online": "yes",
                                                "bdSeq": 1, "ts": 1}).encode(), "invalid"),
    (f"{BASE}/node/gpu0001/telemetry", json.dumps({**VALID_TELEMETRY, "v": 7}).encode(),
     "unknown_version"),
    (f"{BASE}/node/gpu0001/telemetry", b"{" + b" " * 70_000 + b"}", "oversize"),
    (f"{BASE}/node/gpu0001/telemetry",
     json.dumps({**VALID_TELEMETRY, "node": "gpu0002"}).encode(), "mismatch"),
    (f"{BASE}/node/bad id/telemetry", json.dumps(VALID_TELEMETRY).encode(), "bad_topic"),
    (f"{BASE}/node/n\u0153ud/birth", b"{}", "bad_topic"),
    (f"{BASE}/node/{'x' * 300}/telemetry", b"{}", "bad_topic"),
    # Mosquitto itself disconnects a client that puts C0 control characters in a topic, so the
    # hostile id here is a right-to-left override (tests/test_state.py covers control bytes).
    (f"{BASE}/node/gpu\u202e1000/status", b"{}", "bad_topic"),
    (f"{BASE}/job/41/status", json.dumps({"v": 1, "job_id": "41", "state": "ZZ",
                                          "ts": 1}).encode(), "invalid"),
]


async def publish_bad(url) -> None:
    async with aiomqtt.Client(url.host, url.port, identifier="hostile",
                              protocol=aiomqtt.ProtocolVersion.V311) as client:
        for topic, payload, _reason in BAD_MESSAGES:
            await client.publish(topic, payload, qos=1)


async def test_console_ingest_counts_bad_input_and_state_stays_right(mosquitto, tmp_path):
    agent = spawn("agent", "--broker", str(mosquitto.url), "--cluster", CLUSTER,
                  "--node-id", "gpu0001", log=tmp_path / "agent.log")
    ingest = Ingest(CLUSTER)
    state = FleetState(CLUSTER, ingest.malformed)
    feed = LiveFeed(mosquitto.url, ingest, client_id="test-console")
    stop = asyncio.Event()
    task = asyncio.create_task(feed.run(stop))
    try:
        def tick() -> bool:
            state.apply(ingest.take_batch(), time.time())
            st = state.nodes.get("gpu0001")
            return st is not None and st.telemetry is not None and st.verdict.value == "ok"

        await eventually(tick, 15, message="gpu0001 ok")
        seq_before = state.nodes["gpu0001"].last_seq
        await publish_bad(mosquitto.url)
        await eventually(lambda: tick() and ingest.malformed.total >= len(BAD_MESSAGES), 10,
                         message="all bad messages counted")
        assert feed.conn.state == "connected"
        assert not task.done()
        counted = ingest.malformed.by_reason
        for _t, _p, reason in BAD_MESSAGES:
            assert counted[reason] >= 1, (reason, dict(counted))
        assert ingest.malformed.total == len(BAD_MESSAGES)
        # Nothing partial reached the state: the one real node is still the only one, still ok,
        # and its seq was not pushed to 99999 by the mismatched payload.
        assert set(state.nodes) == {"gpu0001"}
        st = state.nodes["gpu0001"]
        assert st.verdict.value == "ok" and st.online is True
        assert seq_before <= st.last_seq < 1000
        # Topics in the log are printable (control characters escaped), bounded in length.
        assert all(m.topic.isprintable() and len(m.topic) <= 200 for m in ingest.malformed.recent)
    finally:
        stop.set()
        await task
        stop_process(agent)


async def test_status_keeps_running_and_reports_bad_input(telling_mosquitto, tmp_path):
    mosquitto = telling_mosquitto
    url = str(mosquitto.url)
    agent = spawn("agent", "--broker", url, "--cluster", CLUSTER, "--node-id", "gpu0001",
                  log=tmp_path / "agent.log")
    try:
        await asyncio.sleep(1.0)
        proc = subprocess.Popen(
            fleetdeck_cmd("status", "--broker", url, "--cluster", CLUSTER, "--json", "--wait",
                          "8"), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        # The bad messages are not retained: send them once status has subscribed (its
        # start-up takes a few seconds on a loaded 2-core machine; a fixed 4 s was a guess).
        await eventually(lambda: subscribers(mosquitto, "fd-status-"), 30, 0.05,
                         "status subscribed")
        await publish_bad(mosquitto.url)
        out, err = await asyncio.to_thread(proc.communicate, timeout=30)
    finally:
        stop_process(agent)
    assert proc.returncode == 0, err
    data = json.loads(out)
    assert data["totals"]["malformed"] == len(BAD_MESSAGES)
    assert data["totals"]["nodes"] == 1
    assert data["nodes"][0]["verdict"] == "ok"
    assert {m["reason"] for m in data["malformed"]} >= {"not_json", "invalid", "oversize",
                                                         "unknown_version", "bad_topic"}


EVIL = "x\x1b[2J\x1b]0;pwned\x07\x1b[?1049l\u202eevil\r\n"


async def test_control_characters_in_free_text_are_replaced_not_shown(mosquitto):
    """An ESC in an event's message cleared the console's screen and retitled the operator's
    terminal (OSC 0), and ``fleetdeck events`` printed it raw: free text is made printable at
    ingest (U+FFFD for each control or bidi-override character); the message itself is kept,
    never counted malformed (an XID event must not be lost to one stray byte)."""
    ingest = Ingest(CLUSTER)
    feed = LiveFeed(mosquitto.url, ingest, client_id="test-console-ctl")
    stop = asyncio.Event()
    task = asyncio.create_task(feed.run(stop))
    events, jobs = [], {}
    try:
        await eventually(lambda: feed.conn.state == "connected", 10, message="connected")
        async with aiomqtt.Client(mosquitto.url.host, mosquitto.url.port, identifier="evil",
                                  protocol=aiomqtt.ProtocolVersion.V311) as client:
            await client.publish(f"{BASE}/node/gpu0001/event", json.dumps({
                "v": 1, "node": "gpu0001", "event_id": "gpu0001.1.1", "seq": 1, "ts": 1,
                "kind": "xid", "severity": "error", "component": "gpu3" + EVIL,
                "message": "Xid 79 " + EVIL, "data": {"xid": 79, "note": EVIL}}).encode(),
                qos=1)
            await client.publish(f"{BASE}/job/41/status", json.dumps({
                "v": 1, "job_id": "41", "name": EVIL, "user": EVIL, "state": "R", "ts": 1,
                "reason": EVIL}).encode(), qos=1)

        def got() -> bool:
            batch = ingest.take_batch()
            events.extend(ev for _rx, ev in batch.events)
            jobs.update({k: job for k, (_rx, job) in batch.jobs.items()})
            return bool(events) and "41" in jobs

        await eventually(got, 10, message="event and job status ingested")
    finally:
        stop.set()
        await task
    (ev,) = events
    job = jobs["41"]
    texts = [ev.message, ev.component, str(ev.data["note"]), job.name, job.user, job.reason]
    for text in texts:
        assert text.isprintable() and "\ufffd" in text, repr(text)
    assert ev.message.startswith("Xid 79 x") and ev.message.endswith("evil\ufffd\ufffd")
    assert ingest.malformed.total == 0


async def test_control_characters_in_telemetry_never_reach_status(telling_mosquitto):
    """Terminal escapes in telemetry strings (an IB port's ``state``, an agent's errors) went
    through the fast decoder untouched into ``status``'s table (rich prints ESC in a cell raw)
    and the TUI. They are made printable at decode, v1 and v2 alike, and the sample is kept:
    the port still reads down (its state is not ACTIVE), nothing is counted malformed."""
    from msgspec.structs import replace

    from fleetdeck.protocol import codec, wire2
    from tests.helpers import FakeNode

    mosquitto = telling_mosquitto
    url = str(mosquitto.url)
    node1, node2 = FakeNode("gpu0001", CLUSTER), FakeNode("gpu0002", CLUSTER)
    proc = subprocess.Popen(
        fleetdeck_cmd("status", "--broker", url, "--cluster", CLUSTER, "--wait", "6"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    await eventually(lambda: subscribers(mosquitto, "fd-status-"), 30, 0.05, "status subscribed")
    async with aiomqtt.Client(mosquitto.url.host, mosquitto.url.port, identifier="evil",
                              protocol=aiomqtt.ProtocolVersion.V311) as client:
        for node in (node1, node2):
            await client.publish(node.topic(Kind.BIRTH), codec.encode(node.birth()), qos=1)
        for _ in range(3):
            v1 = node1.telemetry()
            v1 = replace(v1, ib_ports=[replace(v1.ib_ports[0], state="DOWN" + EVIL),
                                       *v1.ib_ports[1:]],
                         agent=replace(v1.agent, errors=["nvml: " + EVIL]))
            await client.publish(node1.topic(Kind.TELEMETRY), codec.encode(v1), qos=1)
            v2 = node2.telemetry()
            ports = list(v2.ib_ports)
            ports[3] = replace(ports[3], phys_state="Polling" + EVIL)
            v2 = replace(v2, ib_ports=ports)
            payload = wire2.TelemetryEncoder().encode(v2, node2.now)
            assert payload.startswith(wire2.V2_PREFIX) and b"\\u001b" in payload
            await client.publish(node2.topic(Kind.TELEMETRY), payload, qos=1)
            await asyncio.sleep(0.5)
    out, err = await asyncio.to_thread(proc.communicate, timeout=30)
    assert proc.returncode == 0, err
    text = out.decode()
    assert b"\x1b" not in out and "\u202e" not in text and "\x07" not in text, text
    assert "gpu0001" in text and "gpu0002" in text, text
    assert "DOWNx\ufffd[2J" in text and "Pollingx\ufffd[2J" in text, text
    assert "malformed 0" in text, text


def test_printable_payloads_leave_clean_ones_alone() -> None:
    from fleetdeck.protocol import codec

    clean = json.dumps(VALID_TELEMETRY).encode()
    assert codec.printable(clean) is clean
    quoted = json.dumps({"a": 'say "hi"', "n": 2**70}).encode()  # an escape, nothing to mend
    assert codec.printable(quoted) is quoted
    dirty = json.dumps({"a": ["ok", {"k\x1b": "x\x7fy\u202e"}], "n": 2**70, "f": 0.1}).encode()
    assert json.loads(codec.printable(dirty)) == {
        "a": ["ok", {"k\ufffd": "x\ufffdy\ufffd"}], "n": 2**70, "f": 0.1}
    assert codec.printable(b"{not json\\") == b"{not json\\"


def test_a_node_whose_every_sample_is_refused_says_why_not_no_telemetry_heard():
    """A node whose samples all failed validation read "H1 no telemetry heard from it yet" in
    status and the TUI, "wait for telemetry before acting", while every sample had been
    refused with a precise reason (an SRE drill)."""
    from fleetdeck.protocol import codec
    from tests.helpers import FakeNode

    node = FakeNode()
    ingest = Ingest(node.cluster)
    state = FleetState(node.cluster, ingest.malformed)
    node.feed(ingest, node.birth(), Kind.BIRTH)
    node.feed(ingest, node.status(), Kind.STATUS)
    for _ in range(6):
        doc = json.loads(codec.encode(node.telemetry()))
        doc["ib_ports"][0]["symbol_error"] = -1
        ingest.handle(node.topic(Kind.TELEMETRY), json.dumps(doc).encode(), node.now)
        state.apply(ingest.take_batch(), node.now)
        state.judge_fleet(node.now)
    st = state.nodes[node.node_id]
    assert st.stale
    [h1] = st.liveness
    assert h1.rule == "H1"
    assert h1.text.startswith("no telemetry accepted: 6 samples refused, the last 0 s ago "
                              "(invalid: "), h1.text
    assert "symbol_error" in h1.text
    from fleetdeck.console.judgements import recommended_action

    assert recommended_action(st).startswith("check what its agent sends (its samples are "
                                              "refused")


def test_a_rejected_message_is_said_in_the_timeline_with_its_topic_once_a_while():
    """The header counted malformed messages and only console.log named their topics (a
    drill sent 19 kinds; the operator saw "malformed 19"): each topic's first is said in the
    timeline, with why, and then once every 10 minutes at most (all are counted)."""
    from fleetdeck.console.session import ConsoleSession

    now = [1_800_000_000.0]
    session = ConsoleSession("c", clock=lambda: now[0], follow_up=False)
    bad = f"{ROOT}/c/node/gpu0010/telemetry"
    for _ in range(3):
        session.ingest.handle(bad, b"\x00garbage", now[0])
    session.ingest.handle(f"{ROOT}/c/node/gpu0011/status", b'{"v":1}', now[0])
    session.tick(now[0])
    said = [x for x in session.log.lines() if x.kind == "malformed"]
    assert [x.nodes for x in said] == [("gpu0010",), ("gpu0011",)]
    assert said[0].text.startswith("bad message on node/gpu0010/telemetry: not_json"), \
        said[0].text
    assert session.state.malformed.total == 4
    now[0] += 60
    session.ingest.handle(bad, b"{", now[0])
    session.tick(now[0])
    assert len([x for x in session.log.lines() if x.kind == "malformed"]) == 2
    now[0] += 600
    session.ingest.handle(bad, b"{", now[0])
    session.tick(now[0])
    assert len([x for x in session.log.lines() if x.kind == "malformed"]) == 3


async def test_rejected_messages_are_kept_in_the_store_once_a_minute(tmp_path):
    """Kept for `fleetdeck events`, but a fleet on an agent version the console cannot read
    would add 10 rows a second: one a minute (a review); the header counts them all."""
    from fleetdeck.console.session import ConsoleSession
    from fleetdeck.console.store import CONSOLE_SOURCE

    now = [1_800_000_000.0]
    session = ConsoleSession("c", clock=lambda: now[0], follow_up=False)
    await session.open_store(tmp_path / "store.db")
    try:
        for minute in range(2):
            for node in range(1 + 7 * minute, 8 + 7 * minute):  # topics new to the timeline
                session.ingest.handle(f"{ROOT}/c/node/gpu{node:04d}/telemetry", b"{", now[0])
                session.tick(now[0])
                now[0] += 1
            now[0] += 60
        await session.flush()
        assert session.store is not None
        kept = await session.store.events(0, [CONSOLE_SOURCE], ["malformed"])
        assert [r["message"].split(":")[0] for r in kept] == [
            "bad message on node/gpu0001/telemetry", "bad message on node/gpu0008/telemetry"]
        assert session.state.malformed.total == 14
    finally:
        await session.close()


def test_a_scheduler_stamped_at_the_protocols_last_ms_crashes_no_tick():
    """A retained scheduler status stamped 2^53 ms (then valid: year 287396) made every console
    read a running job's step against it and raise "year -283343 is out of range" formatting
    the hang's time (a hostile-publisher audit, 2026-12-07): the console core's tick died.
    A drain stamped there raised the same in the node detail's Slurm reason. The last ms the
    protocol takes is year 9999's now (TS_MS_MAX): the same at that stamp."""
    from fleetdeck.console.judgements import utc_hms
    from fleetdeck.console.rows import drain_reason
    from fleetdeck.console.session import ConsoleSession
    from fleetdeck.protocol.messages import TS_MS_MAX, DrainInfo, DrainState

    now = [1_800_000_000.0]
    session = ConsoleSession("c", clock=lambda: now[0], follow_up=False)
    job = {"v": 1, "job_id": "41", "state": "R", "nodes": ["gpu0001"], "step": 5,
           "total_steps": 100, "step_time_ms": 1000.0, "ts": int(now[0] * 1000)}
    sched = {"v": 1, "online": True, "started": TS_MS_MAX, "name": "evil",
             "ts": TS_MS_MAX}
    session.ingest.handle(f"{ROOT}/c/job/41/status", json.dumps(job).encode(), now[0])
    session.ingest.handle(f"{ROOT}/c/sched/status", json.dumps(sched).encode(), now[0])
    for _ in range(4):
        now[0] += 1.0
        session.tick(now[0])
    # Read as sent: the job's age is two of the scheduler's own stamps apart (its clock's
    # skew cancels), so the job reads hung, at a time no calendar holds, said as none.
    [hung] = [x.text for x in session.log.lines() if x.text.startswith("job 41 hung")]
    assert hung.endswith("(step 5 at ??:??:??)"), hung
    assert utc_hms(TS_MS_MAX / 1000) == "23:59:59"
    assert drain_reason(DrainInfo(state=DrainState.DRAINED, reason="r", requested_by="a",
                                  since_ts=TS_MS_MAX)) == "Reason=r [a@9999-12-31T23:59:59]"


def test_a_stamp_beyond_year_9999_is_malformed_for_every_kind():
    """A forged retained sched/status stamped 2^53 ms (year 287396) was valid: a running job
    read "no step for 9005402599336 s" until the console restarted (a CLI fuzz round). A stamp
    no calendar date holds is refused as malformed, counted and said with its topic, for
    every kind's ts (one TsMs type; the fast decoders share its bound)."""
    from fleetdeck.console.session import ConsoleSession
    from fleetdeck.protocol import codec, fast
    from fleetdeck.protocol.messages import TS_MS_MAX, JobStatus, SchedulerStatus

    now = [1_800_000_000.0]
    session = ConsoleSession("c", clock=lambda: now[0], follow_up=False)
    job = {"v": 1, "job_id": "41", "state": "R", "nodes": ["gpu0001"], "step": 5,
           "total_steps": 100, "step_time_ms": 1000.0, "ts": int(now[0] * 1000)}
    session.ingest.handle(f"{ROOT}/c/job/41/status", json.dumps(job).encode(), now[0])
    sched = {"v": 1, "online": True, "started": 0, "name": "evil", "ts": 2**53}
    session.ingest.handle(f"{ROOT}/c/sched/status", json.dumps(sched).encode(), now[0])
    for _ in range(3):
        now[0] += 1.0
        session.tick(now[0])
    assert session.state.malformed.total == 1
    said = [x.text for x in session.log.lines() if x.kind == "malformed"]
    assert said and said[0].startswith("bad message on sched/status: invalid"), said
    assert not [x for x in session.log.lines() if x.text.startswith("job 41 hung")]
    for beyond in (TS_MS_MAX + 1, 2**53):
        for model, payload in ((SchedulerStatus, {**sched, "ts": beyond}),
                               (JobStatus, {**job, "ts": beyond})):
            with pytest.raises(codec.DecodeError):
                codec.decode(model, json.dumps(payload).encode())
    assert codec.decode(SchedulerStatus, json.dumps({**sched, "ts": TS_MS_MAX}).encode())
    assert fast.TsMs.__metadata__[0].le == TS_MS_MAX


def test_a_time_no_calendar_holds_is_not_said_as_a_clock_time():
    """utc_hms clamped a stamp beyond year 9999 (valid on the wire up to 2^53 ms) to
    23:59:59, and one before year 1 to 00:00:00: a forged stamp read as any other time."""
    from fleetdeck.console.judgements import utc_hms

    assert utc_hms(2**53 / 1000) == "??:??:??"
    assert utc_hms(-(2**53) / 1000) == "??:??:??"
    assert utc_hms(float("nan")) == "??:??:??"
    assert utc_hms(1_800_000_000.0) == "08:00:00"
    assert utc_hms(-1.0) == "23:59:59"
