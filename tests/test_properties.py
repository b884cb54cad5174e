"""Property-based tests: no input from the network can crash decoding, topics or ingest, and
rejected input never changes state."""

import contextlib
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetdeck.console.ingest import Ingest
from fleetdeck.console.state import FleetState
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import MESSAGE_MODELS
from fleetdeck.protocol.topics import Kind, TopicError, parse_topic
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


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(junk=st.lists(st.tuples(topics, st.one_of(st.binary(max_size=200),
                                                  protocolish.map(lambda d: json.dumps(d)
                                                                  .encode()))),
                     max_size=12))
def test_rejected_input_never_changes_state(junk):
    node = FakeNode()
    ingest = Ingest(node.cluster)
    state = FleetState(node.cluster, ingest.malformed)
    node.feed(ingest, node.birth(), Kind.BIRTH)
    node.feed(ingest, node.status(), Kind.STATUS)
    node.feed(ingest, node.telemetry(), Kind.TELEMETRY)
    state.apply(ingest.take_batch(), node.now)
    before = state.nodes["gpu0001"]
    snapshot = (before.telemetry, before.birth, before.online, before.bd_seq, before.last_seq)
    accepted_before = ingest.received - ingest.malformed.total - ingest.ignored
    for topic, payload in junk:
        ingest.handle(topic, payload, node.now)
    accepted = ingest.received - ingest.malformed.total - ingest.ignored - accepted_before
    state.apply(ingest.take_batch(), node.now)
    after = state.nodes["gpu0001"]
    if accepted == 0:
        assert (after.telemetry, after.birth, after.online, after.bd_seq, after.last_seq) == \
            snapshot
        assert set(state.nodes) == {"gpu0001"}
    assert ingest.malformed.total + ingest.ignored + 3 + accepted == ingest.received
