"""`fleetdeck inject` while the simulator's scheduler client is away: the injection went once,
QoS 1 and not retained, to nobody there (its clean session is not subscribed while it makes its
connection again: a broker restart, a takeover), and the command said "no simulator answered"
while the simulator ran. It is sent again with the same id until answered (agents/fleet.py
``inject``), and the simulator answers an id it has met from memory, never injecting twice
(``Fleet._on_inject``).

The test takes the scheduler's connection from it as tests/sim/test_spread_reconnect.py does:
a client of its client id connects, and the broker closes the older session."""

import asyncio
import contextlib
import json
import time
import uuid

from fleetdeck.agents.fleet import inject, inject_ack_topic, inject_topic
from fleetdeck.brokerurl import BrokerURL, make_client
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import JobStatus
from fleetdeck.protocol.topics import Kind, topic_for
from tests.conftest import spawn, stop_process, subscribers


def start_sim(broker, cluster: str, log):
    sim = spawn("--log-level", "info", "sim", "--broker", str(broker.url), "--cluster", cluster,
                "--nodes", "4", "--interval", "0.1", "--seed", "3", log=log)
    deadline = time.monotonic() + 60
    while subscribers(broker, f"fd-{cluster}-sched") < 1:
        assert time.monotonic() < deadline, log.read_text(errors="replace")
        assert sim.poll() is None, log.read_text(errors="replace")
        time.sleep(0.1)
    return sim


async def jobs_named(url: BrokerURL, cluster: str, name: str, for_s: float = 3.0) -> set[str]:
    """The ids of the jobs called ``name`` whose status is heard within ``for_s``."""
    ids: set[str] = set()
    async with make_client(url, f"t-{uuid.uuid4().hex[:8]}") as client:
        await client.subscribe(topic_for(cluster, Kind.JOB, "+"), qos=1)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(for_s):
                async for message in client.messages:
                    payload = message.payload if isinstance(message.payload, bytes) else b""
                    if payload and (st := codec.decode(JobStatus, payload)).name == name:
                        ids.add(st.job_id)
    return ids


async def inject_while_cut_off(url: BrokerURL, cluster: str,
                               name: str) -> tuple[tuple[bool, str], bool]:
    """``inject submit`` while a client of the scheduler's id holds its session: (the answer,
    whether the first send reached that client, not the simulator)."""
    async with make_client(url, f"fd-{cluster}-sched") as impostor:
        await impostor.subscribe(inject_topic(cluster), qos=1)
        first = asyncio.create_task(anext(aiter(impostor.messages)))
        answer = await inject(url, cluster, {"fault": "submit", "name": name, "nodes": 1},
                              timeout=30)
        # Its stream ends (an MqttError) once the simulator takes its session back.
        held = (first.done() and not first.cancelled() and first.exception() is None
                and name.encode() in first.result().payload)
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
    return answer, held


def test_an_inject_sent_while_the_simulator_reconnects_is_answered(telling_mosquitto, tmp_path):
    url = telling_mosquitto.url
    cluster = f"inj{uuid.uuid4().hex[:4]}"
    log = tmp_path / "sim.log"
    sim = start_sim(telling_mosquitto, cluster, log)
    try:
        # A try whose first send the simulator had (it won its session back first) proves
        # nothing: the next.
        for attempt in range(5):
            name = f"cut{attempt}"
            # Unfixed: TimeoutError ("no simulator answered"), the simulator never had it.
            (ok, detail), held = asyncio.run(inject_while_cut_off(url, cluster, name))
            assert ok, detail
            if held:
                break
        assert held, "the simulator took its session back before every first send"
        assert asyncio.run(jobs_named(url, cluster, name)) != set(), detail
    finally:
        code = stop_process(sim, timeout=40)
    said = log.read_text(errors="replace")
    assert code == 0, said
    assert "Traceback" not in said, said


async def send_twice(url: BrokerURL, cluster: str, req_id: str,
                     entry: dict[str, object]) -> list[dict[str, object]]:
    """Publish one injection twice with one id, as ``inject`` sends it again while its answer
    is late: the answers to it."""
    answers: list[dict[str, object]] = []
    async with make_client(url, f"t-{uuid.uuid4().hex[:8]}") as client:
        await client.subscribe(inject_ack_topic(cluster), qos=1)
        request = json.dumps({"id": req_id, **entry}).encode()
        for _ in range(2):
            await client.publish(inject_topic(cluster), request, qos=1)
        async with asyncio.timeout(30):
            async for message in client.messages:
                answer = json.loads(message.payload)  # type: ignore[arg-type]
                if answer.get("id") == req_id:
                    answers.append(answer)
                    if len(answers) == 2:
                        break
    return answers


def test_an_injection_sent_again_is_answered_again_and_injected_once(telling_mosquitto,
                                                                    tmp_path):
    """The simulator took each send of one id for a new injection: two jobs submitted for one
    `fleetdeck inject submit` whose answer was late."""
    url = telling_mosquitto.url
    cluster = f"inj{uuid.uuid4().hex[:4]}"
    log = tmp_path / "sim.log"
    sim = start_sim(telling_mosquitto, cluster, log)
    try:
        answers = asyncio.run(send_twice(url, cluster, "inj-twice-1",
                                         {"fault": "submit", "name": "twice", "nodes": 1}))
        assert [a["ok"] for a in answers] == [True, True], answers
        assert answers[0]["detail"] == answers[1]["detail"]
        # Unfixed: two jobs called "twice".
        assert len(asyncio.run(jobs_named(url, cluster, "twice"))) == 1
    finally:
        code = stop_process(sim, timeout=40)
    said = log.read_text(errors="replace")
    assert code == 0, said
    assert "Traceback" not in said, said
