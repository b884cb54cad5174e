"""``replay --to-broker``: a recording published again into a broker, as the fleet said it.

What the fleet *said* goes out (births, statuses, telemetry, events, acks, job and scheduler
statuses, digests) with its topics and QoS, its state retained; what operators *asked* of the
fleet does not (drains, resumes, restarts, rebirth requests, simulator faults): published
again, they act on whatever listens on that cluster's topics now: an agent of a live fleet of
the same name acts on a drain not yet expired, every agent answers a rebirth request, a live
simulator injects the fault again (docs/recording.md, "Replay into a broker").
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiomqtt

from fleetdeck.brokerurl import BrokerURL, describe_mqtt_error, make_client
from fleetdeck.console.live import retained_births
from fleetdeck.console.recording import ReadReport, RecordingReader
from fleetdeck.console.replay import ROUTINE_OPS, NodeWatch
from fleetdeck.errors import UserError
from fleetdeck.protocol.topics import ROOT, Kind, TopicError, parse_topic
from fleetdeck.transport import TransportError

SAID_KINDS = frozenset({Kind.BIRTH, Kind.STATUS, Kind.TELEMETRY, Kind.EVENT, Kind.ACK,
                        Kind.JOB, Kind.SCHED_ACK, Kind.SCHED_STATUS, Kind.DIGEST,
                        Kind.COLLECTOR, Kind.BRIDGE})
"""What the fleet says (docs/protocol.md, "Topics"): the only topics published again. Anything
else under the cluster's root is what someone asked of it: commands, rebirth requests, and the
simulator's ``sim/inject`` faults, which a replay with ``--force`` into the live broker ran
again on the live simulated fleet (a drill). The bridge's state is Mosquitto's word of the
fleet's path (console/bridge.py): left out, a site console's recording replayed its nodes going
stale with no word of the bridge, and stderr counted it among what operators asked."""
RETAINED_KINDS = frozenset({Kind.BIRTH, Kind.STATUS, Kind.JOB, Kind.SCHED_STATUS, Kind.DIGEST,
                            Kind.COLLECTOR, Kind.BRIDGE})
"""Published retained whatever the recording says: a broker delivers a retained message to a
subscriber already there without the flag (MQTT 3.1.1, 3.3.1.3), so a recording holds each
topic's state retained once, at its start, and the target broker kept that, not the end's (a
drill: "drained 0", every job at its first step)."""
PROBE_S = 1.0
"""How long the target cluster's retained births are listened for before the first publish."""


@dataclass(slots=True)
class Republished:
    """What one ``replay --to-broker`` did."""

    cluster: str
    """The cluster the messages went out under (``--as-cluster`` or the recording's)."""
    sent: int = 0
    retained: int = 0
    """Topics the broker keeps a retained message of after the replay (the last published
    retained on each, unless that was a deletion)."""
    intents_left_out: dict[str, int] = field(default_factory=dict)
    """What was left out (``asked``) -> how many."""
    report: ReadReport | None = None


def said_kind(topic: str) -> Kind | None:
    """The topic's kind when it is one the fleet says (``SAID_KINDS``), else None."""
    try:
        kind = parse_topic(topic).kind
    except TopicError:
        return None
    return kind if kind in SAID_KINDS else None


def asked(topic: str, payload: bytes = b"") -> str:
    """What a topic left out is, for stderr: ``cmd``, ``console_cmd`` (a keyframe, rebirth or
    re-send request a console sent by itself: ``replay.ROUTINE_OPS``), ``sched_cmd``,
    ``rebirth``, ``sim`` (the simulator's faults and their answers), or ``other``."""
    try:
        kind = parse_topic(topic).kind
        # A 40 s recording read "128 node commands" left out, 127 of them the consoles'
        # keyframe requests, under "what operators asked" (a newcomer's run).
        # Its rebirth requests too (a bad birth's, ``FollowUps.plan_rebirths``): they
        # were counted as node commands.
        if kind is Kind.CMD and any(op in payload for op in ROUTINE_OPS):
            return "console_cmd"
        return str(kind)
    except TopicError:
        parts = topic.split("/")
        return "sim" if len(parts) > 3 and parts[3] == "sim" else "other"


def renamed(topic: str, payload: bytes, old: str, new: str) -> tuple[str, bytes]:
    """``topic`` and ``payload`` moved from cluster ``old`` to ``new``: the topic's cluster,
    and a birth's own ``cluster`` field (the console files a birth by its topic; the field is
    renamed too so that the two agree for any other reader)."""
    prefix = f"{ROOT}/{old}/"
    if old == new or not topic.startswith(prefix):
        return topic, payload
    topic = f"{ROOT}/{new}/{topic[len(prefix):]}"
    if topic.endswith("/birth"):
        try:
            obj = json.loads(payload)
        except ValueError:
            return topic, payload  # malformed as recorded: it goes out as it was
        if isinstance(obj, dict) and obj.get("cluster") == old:
            obj["cluster"] = new
            payload = json.dumps(obj, separators=(",", ":")).encode()
    return topic, payload


async def republish(path: Path, url: BrokerURL, speed: float, *, as_cluster: str | None = None,
                    force: bool = False,
                    progress: Callable[[int, float], None] | None = None) -> Republished:
    """Publish the recording at ``path`` into the broker at ``url`` at ``speed`` times real time.

    Refused (:class:`UserError`, nothing published) when the broker already holds retained
    births of the target cluster, unless ``force``: a live fleet of that name, or an earlier
    replay, would mix with the recorded nodes in every console watching it."""
    reader = RecordingReader(path)
    recorded = reader.header.cluster
    # Before any connection, as the console's and the headless replay refuse (exit 3): a
    # recording of another cluster's topics under its header went out as they were (past the
    # probe, which asks of the header's cluster), said as "replayed ... as cluster 'pm'"
    # (docs/recording.md). Read up to its first node only.
    watch = NodeWatch(recorded)
    for line in RecordingReader(path).scan():
        watch.see(line.topic)
        if watch.heard:
            break
    watch.check()
    target = as_cluster or recorded
    out = Republished(target)
    stamp = int(time.time())
    if not force:
        try:
            held = [node for _cluster, node in await retained_births(
                url, f"fd-replay-probe-{stamp}", target, PROBE_S)]
        except (TransportError, aiomqtt.MqttError) as err:
            # Refused, TLS, auth: one sentence, as the publish below says it (a review).
            raise UserError(describe_mqtt_error(url, err)) from None
        if held:
            shown = ", ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
            raise UserError(
                f"the broker at {url} already holds cluster '{target}' ({len(held)} node "
                f"birth{'s' if len(held) != 1 else ''}: {shown}), a live fleet or an earlier "
                f"replay, and the recorded nodes would mix with it: replay under another name "
                f"with --as-cluster NAME, or add --force to replay into it.")
    client = make_client(url, f"fd-replay-{stamp}", keepalive=10)
    kept: dict[str, bool] = {}
    try:
        async with client:
            first: float | None = None
            wall0 = time.monotonic()
            for msg in reader.messages():
                first = msg.t if first is None else first
                kind = said_kind(msg.topic)
                if kind is None:
                    what = asked(msg.topic, msg.payload)
                    out.intents_left_out[what] = out.intents_left_out.get(what, 0) + 1
                    continue
                topic, payload = renamed(msg.topic, msg.payload, recorded, target)
                due = wall0 + (msg.t - first) / speed
                delay = due - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                retain = msg.retain or kind in RETAINED_KINDS
                await client.publish(topic, payload, qos=min(msg.qos, 1), retain=retain)
                out.sent += 1
                if retain:
                    # The broker keeps the last per topic; an empty payload deletes it.
                    kept[topic] = bool(payload)
                if progress and out.sent % 500 == 0:
                    progress(out.sent, msg.t - first)
    except aiomqtt.MqttError as err:
        raise UserError(describe_mqtt_error(url, err)) from None
    out.report = reader.report
    out.retained = sum(kept.values())
    return out
