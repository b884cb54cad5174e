import json

import pytest

from fleetdeck.protocol import codec
from fleetdeck.protocol.ids import InvalidId, validate_id
from fleetdeck.protocol.messages import (
    Ack,
    Birth,
    Command,
    DrainState,
    Event,
    JobStatus,
    Status,
    Telemetry,
    json_schemas,
)
from fleetdeck.protocol.topics import Kind, TopicError, parse_topic, subscriptions, topic_for


@pytest.mark.parametrize("good", ["gpu0001", "a", "n-1.b_c", "X" * 64])
def test_valid_ids(good):
    assert validate_id(good) == good


@pytest.mark.parametrize(
    "bad", ["", "a/b", "a+b", "#", "gpu\x00", "gpu\n1", "-lead", ".x", "x" * 65, "nœud", "a b"]
)
def test_hostile_ids_are_refused(bad):
    with pytest.raises(InvalidId):
        validate_id(bad, "node id")


def test_topic_round_trip_for_every_kind():
    for kind in Kind:
        subject = "gpu0001" if kind not in (Kind.SCHED_CMD, Kind.SCHED_ACK, Kind.SCHED_STATUS,
                                            Kind.REBIRTH, Kind.BRIDGE) else ""
        if kind is Kind.JOB:
            subject = "41"
        topic = topic_for("prod", kind, subject)
        parsed = parse_topic(topic)
        assert (parsed.cluster, parsed.kind, parsed.subject) == ("prod", kind, subject)


@pytest.mark.parametrize(
    "topic",
    [
        "fleetdeck/v2/prod/node/n1/telemetry",
        "fleetdeck/v1/prod/node/n1/unknown",
        "fleetdeck/v1/pr od/node/n1/telemetry",
        "fleetdeck/v1/prod/node/+/telemetry",
        "fleetdeck/v1/prod/node/#/telemetry",
        "fleetdeck/v1/prod/node/n\x01/telemetry",
        "fleetdeck/v1/prod/node/n1/telemetry/extra",
        "other/v1/prod/node/n1/telemetry",
        "fleetdeck/v1/prod",
    ],
)
def test_bad_topics_are_refused(topic):
    with pytest.raises(TopicError):
        parse_topic(topic)


def test_console_subscriptions_parse_as_filters():
    subs = subscriptions("prod")
    assert all(s.startswith("fleetdeck/v1/prod/") for s in subs)
    assert "fleetdeck/v1/prod/node/+/telemetry" in subs


def _telemetry(**over):
    base = {"v": 1, "node": "n1", "seq": 1, "bdSeq": 5, "ts": 1000,
            "gpus": [{"index": 0, "util_pct": 50.0, "temp_c": 40}]}
    base.update(over)
    return json.dumps(base).encode()


def test_round_trip_preserves_every_field():
    from fleetdeck.agents.agent import NodeAgent
    from fleetdeck.agents.sim.node import SimNode
    from fleetdeck.brokerurl import BrokerURL

    agent = NodeAgent(cluster="c", node_id="n1", source=SimNode("n1"), url=BrokerURL("h", 1))
    for msg in (agent.birth(), agent.status(), agent.telemetry()):
        assert codec.decode(type(msg), codec.encode(msg)) == msg


def test_unknown_fields_are_tolerated():
    t = codec.decode(Telemetry, _telemetry(future_field={"x": 1}))
    assert t.node == "n1" and t.gpus[0].util_pct == 50.0


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"{not json", codec.Reason.NOT_JSON),
        (b"", codec.Reason.NOT_JSON),
        (b"\xff\xfe", codec.Reason.NOT_JSON),
        (b"[" * 100_000, codec.Reason.OVERSIZE),
        (b"[" * 5000 + b"]" * 5000, codec.Reason.NOT_JSON),
        (_telemetry(v=2), codec.Reason.UNKNOWN_VERSION),
        (_telemetry(v="1"), codec.Reason.UNKNOWN_VERSION),
        (_telemetry(seq="1"), codec.Reason.INVALID),
        (_telemetry(seq=-1), codec.Reason.INVALID),
        (_telemetry(seq=2**64), codec.Reason.INVALID),
        (_telemetry(node="a/b"), codec.Reason.INVALID),
        (_telemetry(gpus=[{"index": 0, "temp_c": 1e308}]), codec.Reason.INVALID),
        (b'{"v":1,"node":"n1","seq":1,"bdSeq":1,"ts":1,"gpus":[{"index":0,"temp_c":NaN}]}',
         codec.Reason.INVALID),
        (b'{"v":1,"node":"n1","seq":1,"bdSeq":1,"ts":1,"gpus":[{"index":0,"power_w":Infinity}]}',
         codec.Reason.INVALID),
        (_telemetry(gpus=[{"index": i} for i in range(65)]), codec.Reason.INVALID),
        (b"null", codec.Reason.INVALID),
        (b"42", codec.Reason.INVALID),
    ],
)
def test_bad_payloads_are_classified(payload, reason):
    with pytest.raises(codec.DecodeError) as err:
        codec.decode(Telemetry, payload)
    assert err.value.reason is reason


def test_strict_types_no_coercion():
    bad = b'{"v":1,"node":"n1","online":"yes","bdSeq":1,"ts":1}'
    with pytest.raises(codec.DecodeError):
        codec.decode(Status, bad)
    ok = codec.decode(Status, b'{"v":1,"node":"n1","online":true,"bdSeq":1,"ts":1,'
                              b'"drain":{"state":"drained","reason":"xid 79"}}')
    assert ok.drain.state is DrainState.DRAINED


def test_every_message_has_a_json_schema():
    schemas = json_schemas()
    assert set(schemas) == {"birth", "status", "telemetry", "telemetry_v2", "event", "command",
                            "ack", "job", "scheduler", "digest", "collector"}
    assert "bdSeq" in schemas["birth"]["properties"]
    json.dumps(schemas)


def test_minimal_examples_of_each_message_validate():
    codec.decode(Birth, b'{"v":1,"cluster":"c","node":"n","bdSeq":1,"ts":1}')
    codec.decode(Event, b'{"v":1,"node":"n","event_id":"e1","seq":1,"ts":1,"kind":"xid"}')
    codec.decode(Command, b'{"v":1,"cmd_id":"c1","op":"drain","target":"n","issued_by":"u",'
                          b'"issued_at":1,"expires_at":2,"args":{"reason":"r"}}')
    codec.decode(Ack, b'{"v":1,"cmd_id":"c1","by":"n","result":"accepted","ts":1}')
    codec.decode(JobStatus, b'{"v":1,"job_id":"41","state":"R","ts":1}')


def test_what_agents_send_validates_against_the_printed_schema():
    """`fleetdeck schema` is what a script validates live traffic with: every v2 sample (the
    agents' default) failed `telemetry`'s "v": const 1 (a newcomer's scripts). A simulated
    node's birth, status, v1 sample and v2 keyframe and deltas each validate against theirs."""
    import jsonschema

    from fleetdeck.protocol import wire2
    from tests.helpers import FakeNode

    schemas = json.loads(json.dumps(json_schemas()))  # as printed
    node = FakeNode()
    enc = wire2.TelemetryEncoder(keyframe_every_s=3)
    sent = [("birth", codec.encode(node.birth())), ("status", codec.encode(node.status())),
            ("telemetry", codec.encode(node.telemetry()))]
    for _ in range(5):
        sent.append(("telemetry_v2", enc.encode(node.telemetry(), node.now)))
    kinds = set()
    for kind, payload in sent:
        doc = json.loads(payload)
        jsonschema.validate(doc, schemas[kind])
        kinds.add((kind, doc.get("kf") == doc.get("seq") if kind == "telemetry_v2" else None))
    assert ("telemetry_v2", True) in kinds and ("telemetry_v2", False) in kinds
    v1 = json.loads(sent[2][1])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(v1, schemas["telemetry_v2"])
