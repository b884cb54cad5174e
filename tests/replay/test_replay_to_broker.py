"""``replay --to-broker`` publishes what the recorded fleet said, never what operators asked of
it, and does not mix a recording into a cluster the broker already holds (docs/recording.md,
"Replay into a broker")."""

import asyncio
import json
import time
from pathlib import Path

from fleetdeck.brokerurl import make_client
from fleetdeck.console.recording import RecordingWriter
from fleetdeck.console.republish import renamed
from fleetdeck.protocol import codec
from fleetdeck.protocol.topics import ROOT, Kind
from tests.conftest import run_cli
from tests.helpers import FakeNode

DRAIN = {"v": 1, "cmd_id": "c1", "op": "drain", "target": "gpu0001", "issued_by": "alice",
         "issued_at": 1, "expires_at": 2 ** 41, "args": {"reason": "xid 79"}}


def write_recording(path: Path, cluster: str = "rec") -> None:
    """Two nodes for 3 s, an operator's drain of one and a restart of a job, a rebirth."""
    t0 = time.time() - 10
    nodes = [FakeNode(f"gpu000{i}", cluster=cluster, t0=t0) for i in (1, 2)]
    w = RecordingWriter(path, cluster, source="test", started=t0)
    for f in nodes:
        w.write(t0, f.topic(Kind.BIRTH), codec.encode(f.birth()), 1, True)
        w.write(t0, f.topic(Kind.STATUS), codec.encode(f.status()), 1, True)
    base = f"{ROOT}/{cluster}"
    w.write(t0 + 0.1, f"{base}/node/gpu0001/cmd", json.dumps(DRAIN).encode(), 1, False)
    w.write(t0 + 0.1, f"{base}/sched/cmd", json.dumps(
        {**DRAIN, "op": "restart_job", "target": "4101"}).encode(), 1, False)
    w.write(t0 + 0.1, f"{base}/ctl/rebirth", b"{}", 1, False)
    w.write(t0 + 0.1, f"{base}/sim/inject", json.dumps(
        {"id": "inj-1", "fault": "xid79", "node": "gpu0001", "gpu": 3}).encode(), 1, False)
    # Statuses again (the broker keeps the last), and a retained message deleted.
    for f in nodes:
        w.write(t0 + 0.2, f.topic(Kind.STATUS), codec.encode(f.status()), 1, True)
    w.write(t0 + 0.2, f"{base}/job/4101/status", b"{}", 1, True)
    w.write(t0 + 0.3, f"{base}/job/4101/status", b"", 1, True)
    # A job's status as a recorder subscribed already receives it: without the retain flag.
    w.write(t0 + 0.2, f"{base}/job/4102/status", b'{"step": 1}', 1, True)
    w.write(t0 + 0.4, f"{base}/job/4102/status", b'{"step": 5}', 1, False)
    for i in range(1, 4):
        for f in nodes:
            w.write(t0 + i * 0.2, f.topic(Kind.TELEMETRY), codec.encode(f.telemetry()))
    w.close()


async def listen(url, topic_filter: str, seconds: float, started: asyncio.Event
                 ) -> list[tuple[str, bytes]]:
    got: list[tuple[str, bytes]] = []
    async with make_client(url, "watcher") as client:
        await client.subscribe(topic_filter, qos=1)
        started.set()
        try:
            async with asyncio.timeout(seconds):
                async for msg in client.messages:
                    got.append((str(msg.topic), bytes(msg.payload)))
        except TimeoutError:
            pass
    return got


async def listen_retained(url, topic_filter: str) -> list[tuple[str, bytes]]:
    """What the broker hands a new subscriber of ``topic_filter`` (its retained messages)."""
    return await listen(url, topic_filter, 1.5, asyncio.Event())


async def replay_while_listening(url, *args: str) -> tuple[object, list[tuple[str, bytes]]]:
    started = asyncio.Event()
    watch = asyncio.create_task(listen(url, f"{ROOT}/#", 6.0, started))
    await started.wait()
    res = await asyncio.to_thread(run_cli, "replay", *args, "--to-broker", str(url),
                                  "--speed", "10")
    return res, await watch


async def test_commands_in_a_recording_are_not_published_again(mosquitto, tmp_path):
    rec = tmp_path / "rec.jsonl"
    write_recording(rec)
    res, got = await replay_while_listening(mosquitto.url, str(rec))
    assert res.returncode == 0, res.stderr
    topics = [t for t, _ in got]
    assert f"{ROOT}/rec/node/gpu0001/birth" in topics
    assert topics.count(f"{ROOT}/rec/node/gpu0002/telemetry") == 3
    # A live agent of cluster 'rec' listening now would have drained gpu0001 again, and a
    # live simulator would have injected the fault again (a drill).
    assert not [t for t in topics if t.endswith("/cmd") or t.endswith("/rebirth")
                or "/sim/" in t]
    assert ("left out what was asked of the recorded fleet (1 node command, "
            "1 rebirth request, 1 scheduler command, 1 simulator fault message)") in res.stderr
    # Two births, two statuses (sent twice), job 4102; the deleted job 4101 is not kept.
    assert "the broker keeps 5 retained messages of cluster 'rec'" in res.stderr
    # The broker keeps the recording's last word, though recorded without the flag.
    late = await listen_retained(mosquitto.url, f"{ROOT}/rec/job/+/status")
    assert late == [(f"{ROOT}/rec/job/4102/status", b'{"step": 5}')]


async def test_a_cluster_the_broker_holds_is_not_replayed_into_without_force(mosquitto,
                                                                             tmp_path):
    rec = tmp_path / "rec.jsonl"
    write_recording(rec)
    first = await asyncio.to_thread(run_cli, "replay", str(rec), "--to-broker",
                                    str(mosquitto.url), "--speed", "10")
    assert first.returncode == 0, first.stderr
    again, got = await replay_while_listening(mosquitto.url, str(rec))
    assert again.returncode == 2
    assert again.stderr.count("\n") == 1 and "Traceback" not in again.stderr
    assert ("already holds cluster 'rec' (2 node births: gpu0001, gpu0002), a live fleet or an "
            "earlier replay") in again.stderr
    assert "--as-cluster NAME" in again.stderr
    # Only the retained births and statuses the listener was handed on subscribing.
    assert not [t for t, _ in got if t.endswith("/telemetry")]
    # Under another name: topics and the births' own cluster field renamed.
    other, got = await replay_while_listening(mosquitto.url, str(rec), "--as-cluster", "rec2")
    assert other.returncode == 0, other.stderr
    births = [json.loads(p) for t, p in got if t.startswith(f"{ROOT}/rec2/")
              and t.endswith("/birth")]
    assert {b["node"] for b in births} == {"gpu0001", "gpu0002"}
    assert {b["cluster"] for b in births} == {"rec2"}
    status = await asyncio.to_thread(run_cli, "status", "--broker", str(mosquitto.url),
                                     "--cluster", "rec2", "--json", "--wait", "1")
    assert json.loads(status.stdout)["totals"]["nodes"] == 2
    forced, got = await replay_while_listening(mosquitto.url, str(rec), "--force")
    assert forced.returncode == 0, forced.stderr
    assert [t for t, _ in got].count(f"{ROOT}/rec/node/gpu0001/telemetry") == 3


def test_a_broker_that_cannot_be_reached_is_one_sentence(tmp_path):
    """The check for a cluster already there raised a traceback (a review)."""
    rec = tmp_path / "rec.jsonl"
    write_recording(rec)
    res = run_cli("replay", str(rec), "--to-broker", "mqtt://127.0.0.1:9", "--as-cluster", "x")
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and res.stderr.count("\n") == 1
    assert "127.0.0.1:9" in res.stderr


def test_broker_only_flags_without_to_broker_are_one_sentence(tmp_path):
    rec = tmp_path / "rec.jsonl"
    write_recording(rec)
    res = run_cli("replay", str(rec), "--headless", "--as-cluster", "x", "--force")
    assert res.returncode == 2
    assert "--as-cluster and --force only work with --to-broker URL." in res.stderr
    bad = run_cli("replay", str(rec), "--to-broker", "mqtt://127.0.0.1:1", "--as-cluster", "a/b")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "cluster" in bad.stderr


def test_renamed_moves_topic_and_birth_but_not_other_payloads():
    birth = json.dumps({"v": 1, "cluster": "a", "node": "n1"}).encode()
    topic, payload = renamed(f"{ROOT}/a/node/n1/birth", birth, "a", "b")
    assert topic == f"{ROOT}/b/node/n1/birth" and json.loads(payload)["cluster"] == "b"
    assert renamed(f"{ROOT}/a/node/n1/birth", b"{not json", "a", "b")[1] == b"{not json"
    assert renamed(f"{ROOT}/a/job/4/status", b'{"cluster":"a"}', "a", "b") == (
        f"{ROOT}/b/job/4/status", b'{"cluster":"a"}')
    assert renamed("elsewhere/x", b"", "a", "b") == ("elsewhere/x", b"")


def test_a_consoles_own_keyframe_requests_are_not_counted_as_node_commands(capsys):
    """A 40 s recording of the demo read "left out what operators asked of the recorded fleet
    (128 node commands, …)": 127 were the consoles' own keyframe requests, one a resume (a
    newcomer's run)."""
    from fleetdeck.brokerurl import parse_broker_url
    from fleetdeck.console.cli.replay import tell_republished
    from fleetdeck.console.republish import Republished, asked

    cmd = f"{ROOT}/demo/node/gpu0045/cmd"
    assert asked(cmd, b'{"v":1,"cmd_id":"keyframe-gpu0045-1","op":"keyframe"}') == "console_cmd"
    assert asked(cmd, b'{"v":1,"op":"resend_events"}') == "console_cmd"
    # A console's request for a bad birth again (FollowUps.plan_rebirths) is its own
    # too: it was counted as a node command (a review).
    assert asked(cmd, b'{"v":1,"cmd_id":"rebirth-gpu0045-1","op":"rebirth"}') == "console_cmd"
    assert asked(cmd, b'{"v":1,"cmd_id":"c1","op":"resume"}') == "cmd"
    done = Republished("replayed", sent=10, intents_left_out={"cmd": 1, "console_cmd": 127})
    tell_republished(done, parse_broker_url("mqtt://127.0.0.1:1883"))
    assert ("left out what was asked of the recorded fleet (1 node command, 127 console's "
            "keyframe, rebirth or re-send requests)") in capsys.readouterr().err


async def test_a_bridge_state_in_a_recording_is_said_again_not_left_out_as_asked(mosquitto,
                                                                                 tmp_path):
    """A site console's recording holds the bridge's "1"/"0" (Mosquitto's notification,
    console/bridge.py): what the fleet's path said, published again and kept retained as the
    site broker keeps it; it was left out as "what was asked of the recorded fleet"."""
    rec = tmp_path / "rec.jsonl"
    t0 = time.time() - 10
    node = FakeNode("gpu0001", cluster="rec", t0=t0)
    w = RecordingWriter(rec, "rec", source="test", started=t0)
    w.write(t0, node.topic(Kind.BIRTH), codec.encode(node.birth()), 1, True)
    w.write(t0, f"{ROOT}/rec/bridge/state", b"1", 1, True)
    # The bridge's Last Will, as a recorder subscribed already receives it: no retain flag.
    w.write(t0 + 0.2, f"{ROOT}/rec/bridge/state", b"0", 1, False)
    w.close()
    res, got = await replay_while_listening(mosquitto.url, str(rec))
    assert res.returncode == 0, res.stderr
    assert (f"{ROOT}/rec/bridge/state", b"0") in got
    assert "left out" not in res.stderr, res.stderr
    late = await listen_retained(mosquitto.url, f"{ROOT}/rec/bridge/state")
    assert late == [(f"{ROOT}/rec/bridge/state", b"0")]
