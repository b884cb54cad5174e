"""The fast telemetry decoders accept and reject exactly what the pydantic model does.

The pydantic models are the protocol's source of truth (``fleetdeck schema`` prints them); the
msgspec path (v1, and v2's columns) must agree with them on every payload: generated values at
every leaf of a real simulated sample, the bounds (u64, NaN/inf, sizes, patterns), wrong types,
unknown fields and versions. Accepted payloads must decode to equal values.
"""

import copy
import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fleetdeck.protocol import codec, fast, messages, wire2
from fleetdeck.protocol.codec import DecodeError
from tests.helpers import FakeNode

NAN, INF, NINF, BIG = "\x00NaN", "\x00Inf", "\x00-Inf", "\x001e400"
TOKENS = {NAN: "NaN", INF: "Infinity", NINF: "-Infinity", BIG: "1e400"}


def _base() -> dict[str, Any]:
    node = FakeNode()
    node.telemetry()
    tel = node.telemetry()
    # Every field present, even the unreported ones, so every leaf can be mutated.
    raw = fast.to_dict(tel)
    raw["job"] = {"id": "job-1", "ranks_on_node": 8, "step_time_ms": 812.5}
    raw["gpus"][1]["xids"] = [{"code": 79, "ts": 1_000}, {"code": 45, "ts": 2_000}]
    raw["ib_ports"][0]["d"] = {"symbol_error": 1, "link_downed": 0}
    raw["agent"]["errors"] = ["nvml: slow"]
    return raw


BASE = _base()


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:2]):  # two rows are enough to reach every field
            out += _paths(v, (*prefix, i))
    return out


PATHS = _paths(BASE)

EDGE_VALUES = [
    0, 1, -1, 63, 64, 255, 256, 2**32 - 1, 2**32, 2**53, 2**53 + 1, 2**63 - 1, 2**63,
    2**64 - 1, 2**64, 2**70, -(2**63), -(2**64), 10**30,
    0.0, -0.0, 0.5, 1.5, 100.0, 100.0001, 1e15, 1e15 + 1, 5000.0, -50.0, -50.5, 250.0, 1e308,
    NAN, INF, NINF, BIG,
    True, False, None, "", "1", "ACTIVE", "a\n", "-lead", "ok.name_1-2", "sp ace", "P0", "P000",
    "x" * 64, "x" * 65, "x" * 256, "x" * 257, "x" * 2048, "x" * 2049,
    [], [1], {}, {"a": 1},
]
leaf_values = st.one_of(
    st.sampled_from(EDGE_VALUES),
    st.integers(min_value=-(2**66), max_value=2**66),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.booleans(),
)


def _dump(raw: Any) -> bytes:
    text = json.dumps(raw, allow_nan=False)
    for sentinel, token in TOKENS.items():
        text = text.replace(json.dumps(sentinel), token)
    return text.encode()


def _set(raw: Any, path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        raw = raw[key]
    raw[path[-1]] = value


def _pydantic(payload: bytes) -> messages.Telemetry | DecodeError:
    try:
        return codec.decode(messages.Telemetry, payload)
    except DecodeError as err:
        return err


def _fast(payload: bytes) -> fast.Telemetry | DecodeError:
    try:
        return codec.decode_telemetry(payload)
    except DecodeError as err:
        return err


def _same(payload: bytes) -> None:
    ref, got = _pydantic(payload), _fast(payload)
    if isinstance(ref, DecodeError):
        assert isinstance(got, DecodeError), f"fast accepted what pydantic refused: {ref}"
        assert got.reason == ref.reason, (got, ref)
        return
    assert not isinstance(got, DecodeError), f"fast refused what pydantic accepted: {got}"
    assert fast.to_dict(got) == ref.model_dump()
    _equal_floats(fast.to_dict(got), ref.model_dump())


def _equal_floats(a: Any, b: Any) -> None:
    # == says 1 == 1.0; the types must agree too (an int field never holds a float).
    if isinstance(a, dict):
        for k in a:
            _equal_floats(a[k], b[k])
    elif isinstance(a, list):
        for x, y in zip(a, b, strict=True):
            _equal_floats(x, y)
    else:
        assert type(a) is type(b), (a, b)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(PATHS), value=leaf_values)
@example(path=("seq",), value=2**64 - 1)
@example(path=("seq",), value=2**64)
@example(path=("gpus", 0, "ecc", "dbe_vol"), value=2**64)
@example(path=("ib_ports", 1, "xmit_wait"), value=-1)
@example(path=("gpus", 0, "util_pct"), value=NAN)
@example(path=("gpus", 0, "power_w"), value=INF)
@example(path=("host", "uptime_s"), value=BIG)
@example(path=("node",), value="gpu0001\n")
@example(path=("v",), value=2)
@example(path=("v",), value=1.0)
@example(path=("v",), value=True)
@example(path=("seq",), value="1")
@example(path=("seq",), value=1.0)
@example(path=("gpus", 0, "fb_used_mib"), value=True)
@example(path=("gpus", 0, "pstate"), value="P0000")
def test_one_leaf_changed(path: tuple[Any, ...], value: Any) -> None:
    raw = copy.deepcopy(BASE)
    _set(raw, path, value)
    _same(_dump(raw))


SIZED = [("gpus",), ("ib_ports",), ("agent", "errors"), ("gpus", 1, "xids")]


@settings(max_examples=60, deadline=None)
@given(path=st.sampled_from(SIZED), size=st.sampled_from([0, 1, 31, 32, 33, 63, 64, 65]))
def test_list_sizes(path: tuple[Any, ...], size: int) -> None:
    raw = copy.deepcopy(BASE)
    target = raw
    for key in path:
        target = target[key]
    _set(raw, path, [copy.deepcopy(target[0]) for _ in range(size)])
    _same(_dump(raw))


@pytest.mark.parametrize("keys", [32, 33])
def test_counter_delta_map_size(keys: int) -> None:
    raw = copy.deepcopy(BASE)
    raw["ib_ports"][0]["d"] = {f"c{i}": i for i in range(keys)}
    _same(_dump(raw))


@settings(max_examples=100, deadline=None)
@given(where=st.sampled_from([(), ("agent",), ("host",), ("gpus", 0), ("gpus", 0, "ecc"),
                              ("ib_ports", 0), ("gpus", 1, "xids", 0)]),
       name=st.text(min_size=1, max_size=10), value=leaf_values)
def test_unknown_fields_are_ignored(where: tuple[Any, ...], name: str, value: Any) -> None:
    raw = copy.deepcopy(BASE)
    target = raw
    for key in where:
        target = target[key]
    if name in target:
        return
    target[name] = value
    _same(_dump(raw))


@pytest.mark.parametrize("payload", [
    b"", b"{", b"[]", b"null", b"1", b'"x"', b"{}", b'{"v":1}', b'{"v":3,"node":"a"}',
    b'{"v":"1","node":"a","seq":1,"bdSeq":1,"ts":1}', b"\xff\xfe", b'{"node":"a","seq":1,'
    b'"bdSeq":1,"ts":1,"gpus":[1]}', b'{"node":"a","seq":1,"bdSeq":1,"ts":1,"job":null}',
])
def test_odd_payloads(payload: bytes) -> None:
    _same(payload)


def test_oversize_is_refused_by_both() -> None:
    payload = _dump(BASE)
    assert _fast(payload + b" " * codec.DEFAULT_MAX_PAYLOAD).reason == "oversize"  # type: ignore[union-attr]


# --- v2: columns validated as strictly as v1 -------------------------------------------------


def _as_keyframe(raw: dict[str, Any]) -> dict[str, Any]:
    """The v2 keyframe carrying the same values as the v1 dict ``raw`` (every column)."""
    kf = {k: v for k, v in raw.items() if k not in ("gpus", "ib_ports")}
    kf["v"], kf["kf"] = 2, raw["seq"]
    for key, short, spec in (("gpus", "g", wire2.GPU_COLUMNS),
                             ("ib_ports", "p", wire2.PORT_COLUMNS)):
        rows = raw[key]
        if rows:
            kf[short] = {c.wire: [row[c.group][c.field] if c.group else row[c.field]
                                  for row in rows] for c in spec}
    return kf


NESTED = ("ecc", "row_remap", "nvlink")
ROW_LEAVES = [p for p in PATHS if p[0] in ("gpus", "ib_ports") and len(p) > 2
              and (p[2] not in NESTED or len(p) == 4)]
"""Every field of a GPU or port (nested ones: their leaves), and deeper (xids)."""


def _v2(payload: bytes) -> fast.Telemetry | DecodeError:
    try:
        msg = wire2.decode(payload)
        assert isinstance(msg, wire2.TelemetryV2)
        tel = wire2.Reassembler().apply(msg, payload)
        assert tel is not None
        return tel
    except DecodeError as err:
        return err


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(ROW_LEAVES),
       value=leaf_values)
@example(path=("gpus", 0, "ecc", "dbe_vol"), value=2**64)
@example(path=("gpus", 0, "ecc", "dbe_vol"), value=2**64 - 1)
@example(path=("ib_ports", 1, "dev"), value="a b")
@example(path=("gpus", 1, "util_pct"), value=NAN)
@example(path=("gpus", 1, "temp_c"), value=BIG)
def test_v2_columns_bounded_as_v1(path: tuple[Any, ...], value: Any) -> None:
    raw = copy.deepcopy(BASE)
    _set(raw, path, value)
    ref = _pydantic(_dump(raw))
    got = _v2(_dump(_as_keyframe(raw)))
    if isinstance(ref, DecodeError):
        assert isinstance(got, DecodeError), f"v2 accepted what v1 refused: {ref}"
        assert got.reason in ("invalid", "not_json"), got
        return
    assert not isinstance(got, DecodeError), f"v2 refused what v1 accepted: {got}"
    assert fast.to_dict(got) == ref.model_dump()


def test_nan_never_reaches_the_state() -> None:
    raw = copy.deepcopy(BASE)
    _set(raw, ("gpus", 0, "util_pct"), NAN)
    assert isinstance(_fast(_dump(raw)), DecodeError)
    ok = _fast(_dump(BASE))
    assert isinstance(ok, fast.Telemetry)
    assert not any(isinstance(v, float) and not math.isfinite(v)
                   for g in ok.gpus for v in fast.to_dict(g).values())
