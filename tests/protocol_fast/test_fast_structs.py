"""The msgspec telemetry and birth Structs mirror the pydantic models field for field."""

import msgspec
import pytest
from pydantic import BaseModel

from fleetdeck.protocol import fast, messages

PAIRS: list[tuple[type[msgspec.Struct], type[BaseModel]]] = [
    (fast.Telemetry, messages.Telemetry),
    (fast.GpuSample, messages.GpuSample),
    (fast.IbPortSample, messages.IbPortSample),
    (fast.Ecc, messages.Ecc),
    (fast.RowRemap, messages.RowRemap),
    (fast.NvLink, messages.NvLink),
    (fast.XidSeen, messages.XidSeen),
    (fast.AgentInfo, messages.AgentInfo),
    (fast.JobOnNode, messages.JobOnNode),
    (fast.HostSample, messages.HostSample),
    (fast.Birth, messages.Birth),
    (fast.GpuInventory, messages.GpuInventory),
    (fast.IbPortInventory, messages.IbPortInventory),
    (fast.Topology, messages.Topology),
]


@pytest.mark.parametrize(("struct", "model"), PAIRS, ids=[p[0].__name__ for p in PAIRS])
def test_same_fields_same_defaults(struct: type[msgspec.Struct], model: type[BaseModel]) -> None:
    fields = {f.name: f for f in msgspec.structs.fields(struct)}
    assert list(fields) == list(model.model_fields)
    for name, info in model.model_fields.items():
        f = fields[name]
        if info.is_required():
            assert f.required, name
            continue
        default = f.default if f.default is not msgspec.NODEFAULT else f.default_factory()
        expected = info.get_default(call_default_factory=True)
        if isinstance(expected, BaseModel):
            assert default == msgspec.convert(expected.model_dump(), type(default)), name
        elif isinstance(default, tuple):
            # A kept Struct's sequences are tuples (the GC need not walk them): same items.
            assert isinstance(expected, list) and default == tuple(expected), name
        else:
            assert default == expected, name


def test_decodes_what_pydantic_built() -> None:
    model = messages.Telemetry(
        node="gpu0001", seq=3, bdSeq=2, ts=1_000,
        gpus=[messages.GpuSample(index=0, util_pct=55.5, ecc=messages.Ecc(dbe_vol=2**64 - 1),
                                 xids=[messages.XidSeen(code=79, ts=900)])],
        ib_ports=[messages.IbPortSample(dev="mlx5_0", d={"symbol_error": 1})],
        job=messages.JobOnNode(id="j1"),
    )
    tel = msgspec.json.decode(model.model_dump_json(), type=fast.Telemetry)
    assert fast.to_dict(tel) == model.model_dump()
    assert tel.gpus[0].ecc.dbe_vol == 2**64 - 1
    assert fast.may_hold_big_int(model.model_dump_json().encode())
    assert fast.u64_overflow(tel) is None


def test_u64_overflow_is_found() -> None:
    tel = fast.Telemetry(node="n", seq=1, bdSeq=1, ts=1,
                         gpus=[fast.GpuSample(index=0, nvlink=fast.NvLink(replay=2**64))])
    assert fast.u64_overflow(tel) == "gpus.0.nvlink.replay"


def test_structs_are_frozen_and_untracked() -> None:
    import gc

    tel = fast.Telemetry(node="n", seq=1, bdSeq=1, ts=1, gpus=[fast.GpuSample(index=0)])
    with pytest.raises(AttributeError):
        tel.seq = 2  # type: ignore[misc]
    assert not gc.is_tracked(tel.gpus[0])


def test_a_kept_birth_holds_what_was_validated() -> None:
    """The console keeps births as Structs (``fast.birth_of``): every field as validated, and
    re-published (a recording's keyframe) it validates to the same birth."""
    from tests.helpers import FakeNode

    full = FakeNode().birth()
    degraded = messages.Birth(cluster="c", node="n1", bdSeq=5, ts=6, errors=["no NVIDIA driver"],
                              topology=messages.Topology(rack="r1", leaf="leaf-3"))
    for model in (full, degraded):
        kept = fast.birth_of(model)
        assert fast.to_dict(kept) == model.model_dump()
        assert messages.Birth.model_validate_json(msgspec.json.encode(kept)) == model
    assert len(fast.birth_of(full).gpus) == len(full.gpus) == 8


def test_a_kept_birth_is_a_fraction_of_the_model() -> None:
    """Issue 12: 16,384 pydantic births were ~300 MiB of a console's memory."""
    import tracemalloc

    from tests.helpers import FakeNode

    payload = FakeNode().birth().model_dump_json()
    tracemalloc.start()
    try:
        models = [messages.Birth.model_validate_json(payload) for _ in range(200)]
        size_models = tracemalloc.get_traced_memory()[0]
        kept = [msgspec.json.decode(msgspec.json.encode(fast.birth_of(m)), type=fast.Birth)
                for m in models]
        size_kept = tracemalloc.get_traced_memory()[0] - size_models
    finally:
        tracemalloc.stop()
    assert len(kept) == 200
    assert size_kept < size_models / 3
