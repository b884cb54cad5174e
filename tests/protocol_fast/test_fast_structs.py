"""The msgspec telemetry Structs mirror the pydantic models field for field."""

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
