"""Topic layout of protocol v1.

::

    fleetdeck/v1/<cluster>/node/<node>/{birth,status,telemetry,event,cmd,ack}
    fleetdeck/v1/<cluster>/job/<job>/status
    fleetdeck/v1/<cluster>/sched/{cmd,ack,status}
    fleetdeck/v1/<cluster>/ctl/rebirth
    fleetdeck/v1/<cluster>/digest/<node>          (a collector's verdict of one node)
    fleetdeck/v1/<cluster>/collector/<collector>  (a collector's birth and Last Will)
    fleetdeck/v1/<cluster>/bridge/state           (the cluster's Mosquitto bridge into the site
                                                   broker: "1" up, "0" down, its Last Will)
"""

from enum import StrEnum

import msgspec

from fleetdeck.protocol.ids import is_valid_id

ROOT = "fleetdeck/v1"


class Kind(StrEnum):
    BIRTH = "birth"
    STATUS = "status"
    TELEMETRY = "telemetry"
    EVENT = "event"
    CMD = "cmd"
    ACK = "ack"
    JOB = "job"
    SCHED_CMD = "sched_cmd"
    SCHED_ACK = "sched_ack"
    SCHED_STATUS = "sched_status"
    REBIRTH = "rebirth"
    DIGEST = "digest"
    COLLECTOR = "collector"
    BRIDGE = "bridge"


NODE_KINDS = frozenset({Kind.BIRTH, Kind.STATUS, Kind.TELEMETRY, Kind.EVENT, Kind.CMD, Kind.ACK})
RETAINED_NODE_KINDS = (Kind.BIRTH, Kind.STATUS, Kind.DIGEST)
"""A node's retained topics (docs/protocol.md, "Topics"), birth first: ``fleetdeck retire``
clears them in this order, and an empty retained birth is the node retired."""


class TopicError(ValueError):
    """A topic that is not part of protocol v1 (or carries an invalid id)."""


class Topic(msgspec.Struct, frozen=True, gc=False):
    """A parsed topic. A console holds three per node (``Ingest``'s cache): a ``gc=False``
    Struct, so they are nothing for the periodic full collection to walk (docs/performance.md,
    "Frozen garbage")."""

    cluster: str
    kind: Kind
    subject: str = ""
    """The node id for node topics, the job id for job topics, empty otherwise."""

    def __str__(self) -> str:
        return topic_for(self.cluster, self.kind, self.subject)


def topic_for(cluster: str, kind: Kind, subject: str = "") -> str:
    base = f"{ROOT}/{cluster}"
    if kind in NODE_KINDS:
        return f"{base}/node/{subject}/{kind.value}"
    if kind is Kind.JOB:
        return f"{base}/job/{subject}/status"
    if kind is Kind.SCHED_CMD:
        return f"{base}/sched/cmd"
    if kind is Kind.SCHED_ACK:
        return f"{base}/sched/ack"
    if kind is Kind.SCHED_STATUS:
        return f"{base}/sched/status"
    if kind is Kind.DIGEST:
        return f"{base}/digest/{subject}"
    if kind is Kind.COLLECTOR:
        return f"{base}/collector/{subject}"
    if kind is Kind.BRIDGE:
        return f"{base}/bridge/state"
    return f"{base}/ctl/rebirth"


def subscriptions(cluster: str) -> list[str]:
    """What a console subscribes to: everything an operator sees, nothing it sends."""
    base = f"{ROOT}/{cluster}"
    return [
        f"{base}/node/+/birth",
        f"{base}/node/+/status",
        f"{base}/node/+/telemetry",
        f"{base}/node/+/event",
        f"{base}/node/+/ack",
        f"{base}/job/+/status",
        f"{base}/sched/ack",
        f"{base}/sched/status",
    ]


def node_filter(cluster: str, node: str) -> str:
    """Everything of one node in one filter: birth, status, telemetry, event, ack (and its
    commands, which consoles ignore). A sharded collector subscribes to exactly this per node
    it owns, so the broker sends it nothing of the other collectors' nodes; a console on
    digests subscribes to it while the node's detail is open."""
    return f"{ROOT}/{cluster}/node/{node}/+"


def shard_subscriptions(cluster: str) -> list[str]:
    """What a sharded collector subscribes to before it knows its nodes: the collectors (who
    the members are) first, so their retained births arrive before the nodes' births (the
    node ids), then jobs and the scheduler's acks, which every shard needs whole."""
    base = f"{ROOT}/{cluster}"
    return [f"{base}/collector/+", f"{base}/node/+/birth", f"{base}/job/+/status",
            f"{base}/sched/ack", f"{base}/sched/status"]


def digest_subscriptions(cluster: str) -> list[str]:
    """What a console on digests subscribes to: the collectors' per-node digests instead of
    every node's birth, status and telemetry; events and acks stay (they are rare, and the
    timeline and the command tracker need them). The bridge's state last: on a site broker its
    retained "0" then comes after the digests, whose newest dates its fall
    (console/bridge.py)."""
    base = f"{ROOT}/{cluster}"
    return [f"{base}/collector/+", f"{base}/digest/+", f"{base}/node/+/event",
            f"{base}/node/+/ack", f"{base}/job/+/status", f"{base}/sched/ack",
            f"{base}/sched/status", f"{base}/bridge/state"]


def command_topics(cluster: str) -> list[str]:
    """Where operators' commands go (``node/<n>/cmd``, ``sched/cmd``): no console subscribes
    to them; a replay reads them from the recording to say who asked for what."""
    base = f"{ROOT}/{cluster}"
    return [f"{base}/node/+/cmd", f"{base}/sched/cmd"]


def parse_topic(topic: str) -> Topic:
    """Parse a topic string; raise :class:`TopicError` for anything outside protocol v1."""
    parts = topic.split("/")
    if len(parts) < 4 or parts[0] != "fleetdeck":
        raise TopicError("not a fleetdeck topic")
    if parts[1] != "v1":
        raise TopicError(f"unsupported protocol version '{parts[1][:16]}' in topic")
    cluster = parts[2]
    if not is_valid_id(cluster):
        raise TopicError("invalid cluster name in topic")
    rest = parts[3:]
    match rest:
        case ["node", node, kind] if kind in _NODE_KIND_BY_NAME:
            if not is_valid_id(node):
                raise TopicError("invalid node id in topic")
            return Topic(cluster, _NODE_KIND_BY_NAME[kind], node)
        case ["job", job, "status"]:
            if not is_valid_id(job):
                raise TopicError("invalid job id in topic")
            return Topic(cluster, Kind.JOB, job)
        case ["sched", "cmd"]:
            return Topic(cluster, Kind.SCHED_CMD)
        case ["sched", "ack"]:
            return Topic(cluster, Kind.SCHED_ACK)
        case ["sched", "status"]:
            return Topic(cluster, Kind.SCHED_STATUS)
        case ["ctl", "rebirth"]:
            return Topic(cluster, Kind.REBIRTH)
        case ["bridge", "state"]:
            return Topic(cluster, Kind.BRIDGE)
        case ["digest" | "collector" as what, subject]:
            if not is_valid_id(subject):
                raise TopicError(f"invalid {what} id in topic")
            return Topic(cluster, Kind(what), subject)
    raise TopicError("unknown fleetdeck topic")


_NODE_KIND_BY_NAME = {k.value: k for k in NODE_KINDS}
