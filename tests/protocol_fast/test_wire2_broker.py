"""v1 and v2 telemetry through a real Mosquitto into one console session."""

import asyncio
import json
import uuid

import aiomqtt
from msgspec.structs import replace

from fleetdeck.agents.agent import NodeAgent
from fleetdeck.agents.sim.node import SimNode
from fleetdeck.console.session import ConsoleSession
from fleetdeck.protocol import fast, wire2
from fleetdeck.protocol.messages import AckResult, CommandOp
from fleetdeck.protocol.topics import Kind, topic_for
from tests.conftest import eventually

CLUSTER = "wire2"


class Recorded(NodeAgent):
    """A NodeAgent that remembers every sample it built, by seq, to compare with the console:
    the v2 agent's as the columns its simulated node hands the encoder (``NodeAgent.columns``)."""

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.samples: dict[int, fast.Telemetry] = {}
        encode_columns = self.encoder.encode_columns

        def recorded(tel: fast.Telemetry, gpus: wire2.Columns, ports: wire2.Columns,
                     now: float) -> bytes:
            self.samples[tel.seq] = replace(tel, gpus=wire2.rows_from(fast.GpuSample, gpus),
                                            ib_ports=wire2.rows_from(fast.IbPortSample, ports))
            return encode_columns(tel, gpus, ports, now)

        self.encoder.encode_columns = recorded  # type: ignore[method-assign]

    def telemetry(self) -> fast.Telemetry:
        tel = super().telemetry()
        self.samples[tel.seq] = tel
        return tel


def agent(url: object, name: str, wire: int, keyframe_every_s: float = 30.0) -> Recorded:
    return Recorded(cluster=CLUSTER, node_id=name, source=SimNode(name, seed=5), url=url,
                    interval_s=0.2, phase_s=0.0, wire=wire, keyframe_every_s=keyframe_every_s)


def console(url: object) -> ConsoleSession:
    return ConsoleSession(CLUSTER, url=url, client_id=f"console-{uuid.uuid4().hex[:6]}")


def shown(session: ConsoleSession, a: Recorded) -> bool:
    """The console shows exactly a sample the agent sent (every field), past its keyframe."""
    st = session.state.nodes.get(a.node_id)
    tel = st.telemetry if st is not None else None
    return (tel is not None and len(tel.gpus) == 8 and len(tel.ib_ports) == 8
            and a.samples.get(tel.seq) == tel)


async def test_a_v2_and_a_v1_agent_side_by_side(mosquitto):
    new, old = agent(mosquitto.url, "gpu0001", 2), agent(mosquitto.url, "gpu0002", 1)
    session = console(mosquitto.url)
    stop = asyncio.Event()
    tasks = [asyncio.create_task(session.watch(stop, tick_s=0.1))]
    try:
        await eventually(lambda: session.feed is not None and session.feed.conn.connects > 0,
                         10, message="console connected")
        tasks += [asyncio.create_task(a.run(stop)) for a in (new, old)]
        await eventually(lambda: new.encoder.deltas >= 10 and old.seq >= 10, 20,
                         message="ten samples each")
        # Several ticks in a row: each shows the latest sample in full, deltas merged.
        for _ in range(5):
            await eventually(lambda: shown(session, new) and shown(session, old), 5,
                             message="both nodes in full")
            await asyncio.sleep(0.3)
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
    assert new.encoder.keyframes == 1 and old.encoder.keyframes == 0
    assert session.ingest.malformed.total == 0 and session.ingest.keyframe_missing == 0
    assert session.state.nodes["gpu0001"].verdict.value == "ok"
    assert session.state.nodes["gpu0002"].verdict.value == "ok"


async def test_a_console_started_late_asks_for_a_keyframe_and_gets_it(mosquitto):
    a = agent(mosquitto.url, "gpu0001", 2, keyframe_every_s=3600)
    stop = asyncio.Event()
    console_stop = asyncio.Event()
    tasks = [asyncio.create_task(a.run(stop))]
    try:
        await eventually(lambda: a.encoder.deltas >= 3, 15, message="keyframe and deltas sent")
        session = console(mosquitto.url)
        tasks.append(asyncio.create_task(session.watch(console_stop, tick_s=0.1)))
        # A few seconds: the first delta is missed, the ask goes out, the next sample is a
        # keyframe (the periodic one is an hour away).
        await eventually(lambda: shown(session, a), 5, message="telemetry after the ask")
    finally:
        stop.set()
        console_stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
    assert a.encoder.keyframes == 2
    assert session.ingest.keyframe_missing >= 1
    answered = [ack for cmd_id, ack in a.guard.acks.items() if cmd_id.startswith("keyframe-")]
    assert answered and answered[0].op is CommandOp.KEYFRAME
    assert answered[0].result is AckResult.DONE
    assert session.ingest.malformed.total == 0


async def test_malformed_v2_is_counted_with_topic_and_changes_nothing(mosquitto):
    a = agent(mosquitto.url, "gpu0001", 2, keyframe_every_s=3600)
    session = console(mosquitto.url)
    stop = asyncio.Event()
    tasks = [asyncio.create_task(session.watch(stop, tick_s=0.1))]
    topic = topic_for(CLUSTER, Kind.TELEMETRY, "gpu0001")
    try:
        await eventually(lambda: session.feed is not None and session.feed.conn.connects > 0,
                         10, message="console connected")
        tasks.append(asyncio.create_task(a.run(stop)))
        await eventually(lambda: shown(session, a) and a.encoder.deltas >= 2, 15,
                         message="node shown")
        held = session.ingest.reassembler.holds("gpu0001")
        assert held is not None
        bd_seq, kf = held
        seq = a.seq + 1000
        base = {"v": 2, "node": "gpu0001", "seq": seq, "bdSeq": bd_seq, "ts": a.samples[kf].ts}
        rows = list(range(65))
        bad = [
            # a delta whose columns do not fit its keyframe's 8 GPUs
            {**base, "kf": kf, "g": {"util_pct": [50.0] * 7}},
            # a keyframe with a value out of range (it would replace the held one)
            {**base, "kf": seq, "g": {"index": list(range(8)), "util_pct": [101.0] * 8}},
            # a kf that cannot name a keyframe (after its own seq)
            {**base, "kf": seq + 1},
            # more rows than v1 allows GPUs (64)
            {**base, "kf": seq, "g": {"index": [i % 64 for i in rows], "temp_c": [40.0] * 65}},
        ]
        async with aiomqtt.Client(mosquitto.url.host, mosquitto.url.port, identifier="hostile",
                                  protocol=aiomqtt.ProtocolVersion.V311) as client:
            for payload in bad:
                await client.publish(topic, json.dumps(payload).encode(), qos=1)
        await eventually(lambda: session.ingest.malformed.total >= len(bad), 10,
                         message="every bad payload counted")
        assert session.ingest.malformed.by_topic[topic] == len(bad)
        assert session.ingest.malformed.by_reason["invalid"] == len(bad)
        details = [m.detail for m in session.ingest.malformed.recent]
        assert any(d.startswith("g.util_pct: 7 values") for d in details)
        assert any(d.startswith("g.util_pct.0: Expected `float` <= 100") for d in details)
        assert any(d.startswith("kf: keyframe") for d in details)
        assert session.ingest.reassembler.holds("gpu0001") == (bd_seq, kf)
        # The node goes on as before: full, exact samples, the same keyframe.
        before = a.seq
        await eventually(lambda: shown(session, a) and
                         session.state.nodes["gpu0001"].telemetry.seq > before, 10,  # type: ignore[union-attr]
                         message="samples after the bad ones")
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
    assert session.ingest.malformed.total == len(bad)
    assert a.encoder.keyframes == 1
    assert all(g.util_pct != 101.0 for g in session.state.nodes["gpu0001"].telemetry.gpus)  # type: ignore[union-attr]
