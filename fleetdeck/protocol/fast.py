"""msgspec mirrors of the telemetry models: the hot path's types (docs/protocol.md).

The pydantic models in :mod:`fleetdeck.protocol.messages` stay the single source of truth (they
print ``fleetdeck schema``); these Structs repeat them field for field, with the same names,
defaults and bounds, so telemetry decodes without a Python object per field. A property test
(tests/protocol_fast/) proves both accept and reject the same payloads.

Where msgspec differs from pydantic:

* msgspec's ``Meta(le=...)`` stops at int64, so the upper bound of a u64 is checked after
  decoding (:func:`u64_overflow`, run only when the payload holds 20 digits in a row);
* ``$`` is written ``\\Z`` here because Python's ``$`` also matches before a trailing newline,
  which pydantic (Rust regex) does not;
* ``omit_defaults``: encoding leaves out what equals the default (pydantic's ``exclude_none``
  and more), which decodes back to the same values. :func:`to_dict` gives every field.

Structs are ``frozen`` (samples are shared between the ingest batch, the fleet state and
history) and ``gc=False`` (they hold no reference cycles, so the cyclic GC need not track them).
"""

from typing import Annotated, Literal

import msgspec

from fleetdeck.protocol import messages
from fleetdeck.protocol.ids import MAX_ID_LEN
from fleetdeck.protocol.messages import XIDS_MAX, XIDS_WINDOW_S

U64_MAX = 2**64 - 1

U64 = Annotated[int, msgspec.Meta(ge=0)]
"""Upper bound 2**64-1 checked by :func:`u64_overflow` (see the module docstring)."""
U32 = Annotated[int, msgspec.Meta(ge=0, le=2**32 - 1)]
TsMs = Annotated[int, msgspec.Meta(ge=0, le=messages.TS_MS_MAX)]  # the models' bound
Pct = Annotated[float, msgspec.Meta(ge=0, le=100)]
NonNeg = Annotated[float, msgspec.Meta(ge=0, le=1e15)]
Celsius = Annotated[float, msgspec.Meta(ge=-50, le=250)]
Id = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z", max_length=MAX_ID_LEN)]
ShortText = Annotated[str, msgspec.Meta(max_length=256)]
Text = Annotated[str, msgspec.Meta(max_length=2048)]
GpuIndex = Annotated[int, msgspec.Meta(ge=0, le=63)]
RecoveryAction = Annotated[int, msgspec.Meta(ge=0, le=255)]
Watts = Annotated[float, msgspec.Meta(ge=0, le=5000)]
SmMhz = Annotated[float, msgspec.Meta(ge=0, le=10000)]
MemMhz = Annotated[float, msgspec.Meta(ge=0, le=20000)]
Links = Annotated[int, msgspec.Meta(ge=0, le=64)]
PortNum = Annotated[int, msgspec.Meta(ge=1, le=255)]
PortStateId = Annotated[int, msgspec.Meta(ge=0, le=15)]
Interval = Annotated[float, msgspec.Meta(gt=0, le=3600)]


class _Struct(msgspec.Struct, frozen=True, gc=False, omit_defaults=True):
    """Unknown fields are ignored (msgspec's default), values are strict (no coercion).

    Not ``kw_only``: v2's merge builds rows positionally, in field order (protocol/wire2.py)."""


class Ecc(_Struct, frozen=True):
    sbe_vol: U64 | None = None
    dbe_vol: U64 | None = None
    sbe_agg: U64 | None = None
    dbe_agg: U64 | None = None
    sram_unc_agg: U64 | None = None
    sram_corr_agg: U64 | None = None


class RowRemap(_Struct, frozen=True):
    correctable: U32 | None = None
    uncorrectable: U32 | None = None
    pending: bool | None = None
    failure: bool | None = None


class NvLink(_Struct, frozen=True):
    links_up: Links | None = None
    links_total: Links | None = None
    crc_flit: U64 | None = None
    crc_data: U64 | None = None
    replay: U64 | None = None
    recovery: U64 | None = None


class XidSeen(_Struct, frozen=True):
    code: U32
    ts: TsMs
    action: RecoveryAction | None = None


def recent_xids(seen: dict[int, int], now_ms: int, window_s: float = XIDS_WINDOW_S,
                actions: dict[int, int] | None = None) -> list[XidSeen]:
    """As :func:`fleetdeck.protocol.messages.recent_xids`, building fast Structs."""
    horizon = now_ms - int(window_s * 1000)
    for code in [c for c, ts in seen.items() if ts < horizon]:
        del seen[code]
        if actions:
            actions.pop(code, None)
    ordered = sorted(seen.items(), key=lambda item: (item[1], item[0]))[-XIDS_MAX:]
    if actions:
        return [XidSeen(code=code, ts=ts, action=actions.get(code)) for code, ts in ordered]
    return [XidSeen(code=code, ts=ts) for code, ts in ordered]


_ECC0 = Ecc()
_REMAP0 = RowRemap()
_NVLINK0 = NvLink()


class GpuSample(_Struct, frozen=True):
    index: GpuIndex
    present: bool = True
    util_pct: Pct | None = None
    mem_util_pct: Pct | None = None
    fb_used_mib: U32 | None = None
    fb_total_mib: U32 | None = None
    temp_c: Celsius | None = None
    mem_temp_c: Celsius | None = None
    power_w: Watts | None = None
    power_limit_w: Watts | None = None
    energy_j: NonNeg | None = None
    sm_clock_mhz: SmMhz | None = None
    mem_clock_mhz: MemMhz | None = None
    sm_clock_max_mhz: SmMhz | None = None
    clock_event_reasons: U64 | None = None
    thermal_violation_ns: U64 | None = None
    power_violation_ns: U64 | None = None
    pstate: Annotated[str, msgspec.Meta(max_length=4)] | None = None
    pcie_gen: Annotated[int, msgspec.Meta(ge=0, le=16)] | None = None
    pcie_width: Annotated[int, msgspec.Meta(ge=0, le=32)] | None = None
    pcie_replay_total: U64 | None = None
    # Shared frozen defaults: decoding a GPU without ecc allocates nothing for it.
    ecc: Ecc = _ECC0
    row_remap: RowRemap = _REMAP0
    nvlink: NvLink = _NVLINK0
    xid_last: U32 | None = None
    xid_last_ts: TsMs | None = None
    xids: Annotated[list[XidSeen], msgspec.Meta(max_length=XIDS_MAX)] = []
    pcie_replay_1m: U32 | None = None
    throttled_last_ts: TsMs | None = None
    throttled_last_reasons: U64 | None = None
    hot_last_ts: TsMs | None = None


class IbPortSample(_Struct, frozen=True):
    dev: Id
    port: PortNum = 1
    state: ShortText | None = None
    state_id: PortStateId | None = None
    phys_state: ShortText | None = None
    phys_state_id: PortStateId | None = None
    rate_gbps: NonNeg | None = None
    width: ShortText | None = None
    lid: U32 | None = None
    sm_lid: U32 | None = None
    xmit_bytes_total: U64 | None = None
    rcv_bytes_total: U64 | None = None
    xmit_Bps: NonNeg | None = None
    rcv_Bps: NonNeg | None = None
    xmit_pkts_total: U64 | None = None
    rcv_pkts_total: U64 | None = None
    symbol_error: U64 | None = None
    link_error_recovery: U64 | None = None
    link_downed: U64 | None = None
    rcv_errors: U64 | None = None
    rcv_remote_phys_errors: U64 | None = None
    xmit_discards: U64 | None = None
    local_link_integrity_errors: U64 | None = None
    excessive_buffer_overrun_errors: U64 | None = None
    xmit_wait: U64 | None = None
    rnr_nak_retry_err: U64 | None = None
    local_ack_timeout_err: U64 | None = None
    carrier_losses_24h: U32 | None = None
    d: Annotated[dict[Annotated[str, msgspec.Meta(max_length=64)], int],
                 msgspec.Meta(max_length=32)] = {}
    errors_1h: Annotated[dict[Annotated[str, msgspec.Meta(max_length=64)], U32],
                         msgspec.Meta(max_length=16)] = {}


class AgentInfo(_Struct, frozen=True):
    version: ShortText = ""
    mode: ShortText = "sim"
    pid: U32 | None = None
    started_ts: TsMs | None = None
    collect_ms: NonNeg | None = None
    errors: Annotated[tuple[Text, ...], msgspec.Meta(max_length=32)] = ()
    """A tuple, not a list: ``()`` is a shared constant and a tuple of strings leaves the GC's
    view, where each sample's empty list was one more object a sweep walked, per node
    (docs/performance.md, "Fewer objects for the GC to walk")."""
    event_seq: U64 | None = None


class JobOnNode(_Struct, frozen=True):
    id: Id
    ranks_on_node: Links = 8
    step_time_ms: NonNeg | None = None


class HostSample(_Struct, frozen=True):
    cpu_util_pct: Pct | None = None
    mem_used_pct: Pct | None = None
    uptime_s: NonNeg | None = None


_AGENT0 = AgentInfo()
_HOST0 = HostSample()


class Telemetry(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """v1 telemetry. Not ``omit_defaults``: ``v`` is always written (v1 and v2 share a topic
    and are told apart by it)."""

    v: Literal[1] = 1
    node: Id
    seq: U64
    bdSeq: U64
    ts: TsMs
    interval_s: Interval = 1.0
    agent: AgentInfo = _AGENT0
    job: JobOnNode | None = None
    host: HostSample = _HOST0
    # Tuples, not lists: a tuple of untracked Structs leaves the GC's view once a collection
    # looks at it, a list never does; two lists a node were a third of the references a full
    # collection followed at 16,384 nodes (docs/performance.md, "Rows as tuples").
    gpus: Annotated[tuple[GpuSample, ...], msgspec.Meta(max_length=64)] = ()
    ib_ports: Annotated[tuple[IbPortSample, ...], msgspec.Meta(max_length=64)] = ()


def u64_fields(cls: type[msgspec.Struct]) -> tuple[str, ...]:
    """The fields of ``cls`` typed u64 (their ceiling is checked after validation)."""
    return tuple(f.name for f in msgspec.structs.fields(cls) if f.type in (U64, U64 | None))


_ECC_U64 = u64_fields(Ecc)
_NVLINK_U64 = u64_fields(NvLink)
_GPU_U64 = u64_fields(GpuSample)
_PORT_U64 = u64_fields(IbPortSample)
_AGENT_U64 = u64_fields(AgentInfo)
_TEL_U64 = u64_fields(Telemetry)


def _over(obj: object, names: tuple[str, ...]) -> str | None:
    for name in names:
        value = getattr(obj, name)
        if value is not None and value > U64_MAX:
            return name
    return None


def u64_overflow(tel: Telemetry) -> str | None:
    """The location (``gpus.3.ecc.dbe_vol``) of the first u64 field above 2**64-1, or None.

    Runs only when the payload holds a run of 20 digits (:func:`may_hold_big_int`): a number
    below 2**64 has at most 20 digits, and most payloads hold no such run at all.
    """
    if (name := _over(tel, _TEL_U64)) is not None:
        return name
    if (name := _over(tel.agent, _AGENT_U64)) is not None:
        return f"agent.{name}"
    for i, gpu in enumerate(tel.gpus):
        if (name := _over(gpu, _GPU_U64)) is not None:
            return f"gpus.{i}.{name}"
        if (name := _over(gpu.ecc, _ECC_U64)) is not None:
            return f"gpus.{i}.ecc.{name}"
        if (name := _over(gpu.nvlink, _NVLINK_U64)) is not None:
            return f"gpus.{i}.nvlink.{name}"
    for i, port in enumerate(tel.ib_ports):
        if (name := _over(port, _PORT_U64)) is not None:
            return f"ib_ports.{i}.{name}"
    return None


_DIGITS = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))
_RUN20 = b"0" * 20


def may_hold_big_int(payload: bytes) -> bool:
    """Whether ``payload`` has 20 digits in a row (any integer above 2**64-1 does)."""
    return _RUN20 in payload.translate(_DIGITS)


def to_dict(obj: msgspec.Struct) -> dict[str, object]:
    """Every field, nested Structs as dicts (like pydantic's ``model_dump``): ``to_builtins``
    would drop the defaults (``omit_defaults``)."""
    return {f: _plain(getattr(obj, f)) for f in obj.__struct_fields__}


def _plain(value: object) -> object:
    if isinstance(value, msgspec.Struct):
        return to_dict(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


# --- births (messages.Birth): what a console keeps of every node's inventory ---------------------


class GpuInventory(_Struct, frozen=True):
    index: GpuIndex
    uuid: ShortText = ""
    name: ShortText = ""
    pci_bus_id: ShortText = ""
    memory_mib: U32 | None = None


class IbPortInventory(_Struct, frozen=True):
    dev: Id
    port: PortNum = 1
    netdev: ShortText = ""
    gpu_affinity: GpuIndex | None = None
    link_layer: ShortText = "InfiniBand"
    expected_rate_gbps: NonNeg | None = None


class Topology(_Struct, frozen=True):
    rack: ShortText = ""
    leaf: ShortText = ""
    spine_group: ShortText = ""


_TOPOLOGY0 = Topology()


class Birth(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """The retained form of a validated :class:`messages.Birth` (:func:`birth_of`): a pydantic
    birth with its 16 inventory rows is ~19 KiB, which is 300 MiB at 16,384 nodes (issue 12);
    this is ~4. Births are rare, so the pydantic model still validates them. Not
    ``omit_defaults``: ``v`` is always written when a console re-publishes one (a recording's
    keyframe)."""

    v: Literal[1] = 1
    cluster: Id
    node: Id
    bdSeq: U64
    ts: TsMs
    boot_id: ShortText = ""
    agent_version: ShortText = ""
    source: ShortText = "sim"
    sku: ShortText = ""
    interval_s: Interval = 1.0
    driver_version: ShortText | None = None
    cuda_version: ShortText | None = None
    topology: Topology = _TOPOLOGY0
    # Tuples, not lists: a tuple of gc=False Structs or strings leaves the GC's view, three
    # lists a node were walked by every sweep (docs/performance.md, "Fewer objects ...").
    gpus: Annotated[tuple[GpuInventory, ...], msgspec.Meta(max_length=64)] = ()
    ib_ports: Annotated[tuple[IbPortInventory, ...], msgspec.Meta(max_length=64)] = ()
    errors: Annotated[tuple[Text, ...], msgspec.Meta(max_length=32)] = ()
    gpus_expected: Links = 0
    ib_ports_expected: Links = 0
    agent_started_ts: TsMs | None = None


def birth_of(model: "messages.Birth") -> Birth:
    """A validated pydantic birth as the Struct a console keeps (same fields and values)."""
    return msgspec.convert(model, Birth, from_attributes=True)


# --- digests (messages.Digest): a console on digests decodes 13,000 a second at 65,536 nodes ---
# Defined after GpuSample, whose Struct a digest's GPUs decode into.


class DigestFinding(_Struct, frozen=True):
    rule: Annotated[str, msgspec.Meta(max_length=16)]
    severity: Literal["warn", "drain", "info"]
    component: ShortText = ""
    text: Text = ""


class DigestPort(_Struct, frozen=True):
    """``messages.DigestPort``: the fields after ``port`` are sent only for a port with an N
    finding (left out at their defaults), what ``judgements.port_past`` reads."""

    dev: Id
    up: bool
    port: PortNum = 1
    downs_1h: U32 = 0
    downed: bool = False
    fatal_ms: TsMs | None = None
    symbol_ms: TsMs | None = None
    first_ms: TsMs = 0
    symbols_blind: Literal["storm", "saturated"] | None = None


class DigestRecurrence(_Struct, frozen=True):
    """``messages.DigestRecurrence``: a failed node's fault back after it cleared."""

    cleared_ms: TsMs
    after_s: NonNeg
    findings: Annotated[tuple[ShortText, ...], msgspec.Meta(max_length=16)]


class DigestDrain(_Struct, frozen=True):
    state: Literal["none", "draining", "drained"] = "none"
    reason: Text = ""
    requested_by: ShortText = ""
    since_ts: TsMs | None = None
    cmd_id: ShortText = ""
    unsaved: Text = ""  # messages.DrainInfo.unsaved


_DRAIN0 = DigestDrain()


class Digest(msgspec.Struct, frozen=True, gc=False, kw_only=True, omit_defaults=True):
    v: Literal[1] = 1
    node: Id
    by: Id
    ts: TsMs
    verdict: Literal["ok", "degraded", "failed", "stale", "offline"]
    findings: Annotated[list[DigestFinding], msgspec.Meta(max_length=16)] = []
    online: bool | None = None
    stopped: bool = False
    stale: bool = False
    drain: DigestDrain = _DRAIN0
    job: Id | None = None
    ranks_on_node: Links | None = None
    struck_job: Id | None = None
    seen: bool = True
    gpus_expected: Links = 0
    gpus: Annotated[tuple[GpuSample, ...], msgspec.Meta(max_length=64)] = ()
    """``messages.DigestGpu`` holds five of a sample's fields (nine of a GPU power-capped by
    software); decoding them as a GpuSample
    gives the console on digests its samples without building one per GPU. A payload with
    more fields than DigestGpu that GpuSample refuses goes to the reference model, which
    ignores them (codec.decode_digest)."""
    ports: Annotated[list[DigestPort], msgspec.Meta(max_length=64)] = []
    leaf: ShortText = ""
    rack: ShortText = ""
    interval_s: Interval = 1.0
    last_seen_s: NonNeg | None = None
    seq_gaps: U64 = 0
    every_s: Interval = 5.0
    shift_ms: Annotated[int, msgspec.Meta(ge=-2**53, le=2**53)] = 0
    power_limit_w: Watts | None = None
    recurred: DigestRecurrence | None = None
    step_time_ms: NonNeg | None = None
