"""Property-based tests: no input from the network can crash decoding, topics or ingest,
rejected input never changes state, and every message sent is accounted for once (rejected,
ignored, or decoded into exactly what was sent)."""

import contextlib
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetdeck.console.ingest import Ingest
from fleetdeck.console.state import FleetState
from fleetdeck.protocol import codec, fast
from fleetdeck.protocol.messages import MESSAGE_MODELS
from fleetdeck.protocol.topics import Kind, TopicError, parse_topic, topic_for
from tests.helpers import FakeNode

json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20),
)
json_values = st.recursive(
    json_leaf,
    lambda children: st.lists(children, max_size=5)
    | st.dictionaries(st.text(max_size=12), children, max_size=6),
    max_leaves=30,
)
FIELD_NAMES = ["v", "node", "seq", "bdSeq", "ts", "gpus", "ib_ports", "online", "drain",
               "cmd_id", "op", "target", "event_id", "kind", "state", "job_id", "index",
               "util_pct", "temp_c", "present", "dev", "rate_gbps", "symbol_error"]
protocolish = st.dictionaries(st.sampled_from(FIELD_NAMES), json_values, max_size=10)
topics = st.one_of(
    st.text(max_size=80),
    st.builds(lambda a, b, c: f"fleetdeck/v1/{a}/node/{b}/{c}",
              st.text(max_size=10), st.text(max_size=10),
              st.sampled_from(["birth", "status", "telemetry", "event", "ack", "cmd", "x"])),
)
junk_message = st.tuples(topics, st.one_of(st.binary(max_size=200),
                                           protocolish.map(lambda d: json.dumps(d).encode())))
MODELS = list(MESSAGE_MODELS.values())


@given(payload=st.binary(max_size=300), model=st.sampled_from(MODELS))
def test_arbitrary_bytes_only_ever_raise_decode_error(payload, model):
    with contextlib.suppress(codec.DecodeError):
        codec.decode(model, payload)


@given(obj=st.one_of(json_values, protocolish), model=st.sampled_from(MODELS))
def test_arbitrary_json_only_ever_raises_decode_error(obj, model):
    with contextlib.suppress(codec.DecodeError):
        codec.decode(model, json.dumps(obj).encode())


@given(depth=st.integers(min_value=1, max_value=20_000))
def test_deep_nesting_is_rejected_not_crashing(depth):
    payload = b"[" * depth + b"]" * depth
    try:
        codec.decode(MODELS[2], payload, max_size=10**6)
    except codec.DecodeError as err:
        assert err.reason in (codec.Reason.INVALID, codec.Reason.NOT_JSON)


@given(special=st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-1e999"]))
def test_non_finite_numbers_are_rejected(special):
    body = ('{"v":1,"node":"n","seq":1,"bdSeq":1,"ts":1,"gpus":[{"index":0,"temp_c":'
            + special + "}]}").encode()
    try:
        codec.decode(MESSAGE_MODELS["telemetry"], body)
        raise AssertionError("accepted a non-finite number")
    except codec.DecodeError:
        pass


@given(topic=topics)
def test_topic_parser_accepts_or_raises_topic_error(topic):
    try:
        parsed = parse_topic(topic)
    except TopicError:
        return
    assert "/" not in parsed.cluster and "+" not in parsed.subject and "#" not in parsed.subject
    assert all(c.isprintable() for c in parsed.subject)


def _sent_on(junk, topic: str) -> list[bytes]:
    return [payload for t, payload in junk if t == topic]


def _decodes_to(payload: bytes, msg) -> bool:
    try:
        return codec.decode(type(msg), payload) == msg
    except codec.DecodeError:
        return False


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(junk=st.lists(junk_message, max_size=12))
def test_rejected_input_never_changes_state(junk):
    node = FakeNode()
    ingest = Ingest(node.cluster)
    state = FleetState(node.cluster, ingest.malformed)
    birth, status, telemetry = node.birth(), node.status(), node.telemetry()
    node.feed(ingest, birth, Kind.BIRTH)
    node.feed(ingest, status, Kind.STATUS)
    node.feed(ingest, telemetry, Kind.TELEMETRY)
    first = ingest.take_batch()
    # The three valid messages sent are the three decoded: none rejected, none lost or altered.
    assert (ingest.received, ingest.malformed.total, ingest.ignored, first.messages) == (3, 0, 0, 3)
    assert first.births[node.node_id][1] == fast.birth_of(birth)
    assert first.statuses[node.node_id][1] == status
    assert first.telemetry[node.node_id][1] == telemetry
    state.apply(first, node.now)
    before = state.nodes["gpu0001"]
    assert (before.birth, before.telemetry) == (fast.birth_of(birth), telemetry)
    snapshot = (before.telemetry, before.birth, before.online, before.bd_seq, before.last_seq)
    for topic, payload in junk:
        ingest.handle(topic, payload, node.now)
    batch = ingest.take_batch()
    # Each message sent is received once and ends up exactly once: rejected, ignored or decoded.
    assert ingest.received == 3 + len(junk)
    assert ingest.malformed.total + ingest.ignored + batch.messages == len(junk)
    # Whatever was decoded is what was sent on that node's topic, not something else.
    kept = [(Kind.BIRTH, m) for _rx, m in batch.births.values()] \
        + [(Kind.STATUS, m) for _rx, m in batch.statuses.values()] \
        + [(Kind.TELEMETRY, m) for _rx, m in batch.telemetry.values()] \
        + [(Kind.EVENT, m) for _rx, m in batch.events]
    for kind, msg in kept:
        sent = _sent_on(junk, topic_for(node.cluster, kind, msg.node))
        assert any(_decodes_to(payload, msg) for payload in sent), (kind, msg)
    state.apply(batch, node.now)
    after = state.nodes["gpu0001"]
    if batch.messages == 0:
        assert (after.telemetry, after.birth, after.online, after.bd_seq, after.last_seq) == \
            snapshot
        assert set(state.nodes) == {"gpu0001"}


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(plan=st.lists(st.one_of(st.floats(min_value=0.05, max_value=30), junk_message),
                     min_size=1, max_size=15))
def test_valid_telemetry_among_junk_is_decoded_as_sent(plan):
    """A float in the plan: the node's next sample, that many seconds later; else junk."""
    node = FakeNode()
    ingest = Ingest(node.cluster)
    node.feed(ingest, node.birth(), Kind.BIRTH)
    ingest.take_batch()
    sent, junk = [], []
    for step in plan:
        if isinstance(step, float):
            sample = node.telemetry(advance=step)
            sent.append(sample)
            node.feed(ingest, sample, Kind.TELEMETRY)
        else:
            junk.append(step)
            ingest.handle(*step, node.now)
    batch = ingest.take_batch()
    assert ingest.received == 1 + len(plan)
    assert ingest.malformed.total + ingest.ignored + batch.messages == len(junk) + len(sent)
    if not sent:
        assert node.node_id not in batch.telemetry
        return
    # Latest wins, and it is the last sample sent, field for field; every seq sent is seen.
    assert batch.telemetry[node.node_id][1] == sent[-1]
    assert batch.seqs(node.node_id) == [t.seq for t in sent]
    assert batch.superseded == len(sent) - 1

