"""Pydantic v2 models of every protocol v1 message: the single source of truth.

Conventions (see docs/protocol.md):

* every payload carries ``v`` (the protocol major version); an unknown major is rejected;
* times are unix milliseconds (``ts``), durations carry their unit in the field name;
* counters are raw and cumulative, per-interval deltas and rates are sent next to them so the
  console never differentiates across agent restarts;
* ``None``/absent means "not reported" (a reader failed, or the hardware has no such field),
  never zero;
* unknown fields are ignored so newer agents can talk to older consoles; values are validated
  strictly (no string-to-number coercion, no NaN or infinity).
"""

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from fleetdeck.protocol.ids import MAX_ID_LEN

PROTOCOL_MAJOR = 1

U64 = Annotated[int, Field(ge=0, le=2**64 - 1)]
U32 = Annotated[int, Field(ge=0, le=2**32 - 1)]
TS_MS_MAX = 253_402_300_799_999
"""The last ms of year 9999 (9999-12-31T23:59:59.999Z), the last a ``datetime`` holds: a stamp
beyond it is malformed. 2^53 (year 287396) was valid, and a forged retained ``sched/status``
stamped there read "no step for 9005402599336 s" until the console restarted (a CLI fuzz
round; docs/protocol.md, "Rejected input")."""
TsMs = Annotated[int, Field(ge=0, le=TS_MS_MAX)]
Pct = Annotated[float, Field(ge=0, le=100)]
NonNeg = Annotated[float, Field(ge=0, le=1e15)]
Celsius = Annotated[float, Field(ge=-50, le=250)]
Id = Annotated[
    str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=MAX_ID_LEN)
]
ShortText = Annotated[str, StringConstraints(max_length=256)]
Text = Annotated[str, StringConstraints(max_length=2048)]
Scalar = bool | int | float | str | None


class _Msg(BaseModel):
    model_config = ConfigDict(
        extra="ignore",
        strict=True,
        allow_inf_nan=False,
        frozen=True,
        populate_by_name=True,
    )


class _Versioned(_Msg):
    v: Literal[1] = 1


# --- birth: static inventory ---------------------------------------------------------------


class GpuInventory(_Msg):
    index: Annotated[int, Field(ge=0, le=63)]
    uuid: ShortText = ""
    name: ShortText = ""
    pci_bus_id: ShortText = ""
    memory_mib: U32 | None = None


class IbPortInventory(_Msg):
    dev: Id
    port: Annotated[int, Field(ge=1, le=255)] = 1
    netdev: ShortText = ""
    gpu_affinity: Annotated[int, Field(ge=0, le=63)] | None = None
    link_layer: ShortText = "InfiniBand"
    expected_rate_gbps: NonNeg | None = None


class Topology(_Msg):
    """Where the node sits physically and in the fabric (for grouping in the console)."""

    rack: ShortText = ""
    leaf: ShortText = ""
    spine_group: ShortText = ""


class Birth(_Versioned):
    """Retained, QoS 1; first message of every MQTT session of an agent."""

    cluster: Id
    node: Id
    bdSeq: U64
    ts: TsMs
    boot_id: ShortText = ""
    agent_version: ShortText = ""
    source: ShortText = "sim"
    sku: ShortText = ""
    interval_s: Annotated[float, Field(gt=0, le=3600)] = 1.0
    driver_version: ShortText | None = None
    cuda_version: ShortText | None = None
    topology: Topology = Topology()
    gpus: Annotated[list[GpuInventory], Field(max_length=64)] = []
    ib_ports: Annotated[list[IbPortInventory], Field(max_length=64)] = []
    errors: Annotated[list[Text], Field(max_length=32)] = []
    """Why the inventory is incomplete (e.g. 'no NVIDIA driver'): a degraded birth."""
    gpus_expected: Annotated[int, Field(ge=0, le=64)] = 0
    """The GPUs this node should have (its SKU: 8 on ND H100 v5; the agent's
    ``--expect-gpus``); 0: as many as it found at start (``gpus``)."""
    ib_ports_expected: Annotated[int, Field(ge=0, le=64)] = 0
    """The IB ports it should have (``--expect-ib-ports``); 0: as many as it found."""
    agent_started_ts: TsMs | None = None
    """When the agent process that opened this session started (its telemetry's
    ``agent.started_ts``): a console tells two processes that take a node's session from each
    other (H3) by their births, when each session ends before it sends a sample."""


# --- status: liveness + drain --------------------------------------------------------------


class DrainState(StrEnum):
    NONE = "none"
    DRAINING = "draining"
    DRAINED = "drained"


class DrainInfo(_Msg):
    state: DrainState = DrainState.NONE
    reason: Text = ""
    requested_by: ShortText = ""
    since_ts: TsMs | None = None
    cmd_id: ShortText = ""
    unsaved: Text = ""
    """Why the agent could not save this drain state ('' when it could, or an older agent):
    its --state-dir full or unwritable, so an agent restart forgets it (docs/reliability.md,
    "not saved"). In the retained status, not the acks alone: only the console that sent the
    drain heard it, and `status`, other consoles and a restarted one read the drain as kept."""


class Status(_Versioned):
    """Retained, QoS 1. The agent's Last Will is this message with ``online=false``."""

    node: Id
    online: bool
    bdSeq: U64
    ts: TsMs
    drain: DrainInfo = DrainInfo()
    stopped: bool = False
    """True in the goodbye of a clean stop (SIGTERM, ``systemctl stop``): the agent went on
    purpose. Its Last Will says false: it died, or its link did."""


# --- telemetry ------------------------------------------------------------------------------


class Ecc(_Msg):
    sbe_vol: U64 | None = None
    dbe_vol: U64 | None = None
    sbe_agg: U64 | None = None
    dbe_agg: U64 | None = None
    sram_unc_agg: U64 | None = None
    sram_corr_agg: U64 | None = None


class RowRemap(_Msg):
    correctable: U32 | None = None
    uncorrectable: U32 | None = None
    pending: bool | None = None
    failure: bool | None = None


class NvLink(_Msg):
    links_up: Annotated[int, Field(ge=0, le=64)] | None = None
    links_total: Annotated[int, Field(ge=0, le=64)] | None = None
    crc_flit: U64 | None = None
    crc_data: U64 | None = None
    replay: U64 | None = None
    recovery: U64 | None = None


XIDS_WINDOW_S = 2 * 3600
"""Agents report every XID code a GPU logged in this window (the longest one a rule reads)."""
XIDS_MAX = 32
"""At most this many entries per GPU (the newest)."""


class XidSeen(_Msg):
    """One XID code a GPU logged recently, with the time it was logged last."""

    code: U32
    ts: TsMs
    action: Annotated[int, Field(ge=0, le=255)] | None = None
    """XID 154's GPU recovery action, as the driver last stated it (``xids.RECOVERY_ACTIONS``:
    0 none, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and reset; 255 a line cut before its
    action, ``xids.ACTION_UNREAD``); absent for others."""


def recent_xids(seen: dict[int, int], now_ms: int, window_s: float = XIDS_WINDOW_S,
                actions: dict[int, int] | None = None) -> list[XidSeen]:
    """The ``xids`` list from ``{code: unix ms it was last logged}``: codes within the window,
    oldest first, the newest ``XIDS_MAX`` of them. Drops expired codes from ``seen``.
    ``actions``: the stated recovery action per code (XID 154's)."""
    horizon = now_ms - int(window_s * 1000)
    for code in [c for c, ts in seen.items() if ts < horizon]:
        del seen[code]
        if actions:
            actions.pop(code, None)
    ordered = sorted(seen.items(), key=lambda item: (item[1], item[0]))[-XIDS_MAX:]
    actions = actions or {}
    return [XidSeen(code=code, ts=ts, action=actions.get(code)) for code, ts in ordered]


class GpuSample(_Msg):
    index: Annotated[int, Field(ge=0, le=63)]
    present: bool = True
    util_pct: Pct | None = None
    mem_util_pct: Pct | None = None
    fb_used_mib: U32 | None = None
    fb_total_mib: U32 | None = None
    temp_c: Celsius | None = None
    mem_temp_c: Celsius | None = None
    power_w: Annotated[float, Field(ge=0, le=5000)] | None = None
    power_limit_w: Annotated[float, Field(ge=0, le=5000)] | None = None
    energy_j: NonNeg | None = None
    sm_clock_mhz: Annotated[float, Field(ge=0, le=10000)] | None = None
    mem_clock_mhz: Annotated[float, Field(ge=0, le=20000)] | None = None
    sm_clock_max_mhz: Annotated[float, Field(ge=0, le=10000)] | None = None
    clock_event_reasons: U64 | None = None
    thermal_violation_ns: U64 | None = None
    power_violation_ns: U64 | None = None
    pstate: Annotated[str, StringConstraints(max_length=4)] | None = None
    pcie_gen: Annotated[int, Field(ge=0, le=16)] | None = None
    pcie_width: Annotated[int, Field(ge=0, le=32)] | None = None
    pcie_replay_total: U64 | None = None
    ecc: Ecc = Ecc()
    row_remap: RowRemap = RowRemap()
    nvlink: NvLink = NvLink()
    xid_last: U32 | None = None
    xid_last_ts: TsMs | None = None
    xids: Annotated[list[XidSeen], Field(max_length=XIDS_MAX)] = []
    """Every XID code this GPU logged in the last ``XIDS_WINDOW_S``, one entry per code (its
    latest time), oldest first, at most ``XIDS_MAX`` (the newest). Absent from agents older
    than this field: a console then judges ``xid_last`` alone. ``xid_last`` stays for them."""
    pcie_replay_1m: U32 | None = None
    """PCIe replays the agent counted over the last minute (rule G11's window), so a console
    that has watched for seconds judges the whole minute. Absent from older agents."""
    throttled_last_ts: TsMs | None = None
    """Sample time of this GPU's last throttled sample (a throttle bit of rule G12, or
    ``thermal_violation_ns`` grew) while the agent holds G12 for it (fleetdeck/protocol/
    thermal.py: until it has worked a minute without throttling, or an hour idle; a power
    throttle a minute), else absent: a console that has watched for seconds (a one-shot
    ``status``) holds G12 as one watching all along does. Absent from older agents."""
    throttled_last_reasons: U64 | None = None
    """``clock_event_reasons`` of that sample (what the held G12 names), with
    ``throttled_last_ts``."""
    hot_last_ts: TsMs | None = None
    """Sample time of this GPU's last reading at or above 87 °C while rule G13 holds (until a
    reading below 84 °C), else absent. Absent from older agents."""


class IbPortSample(_Msg):
    dev: Id
    port: Annotated[int, Field(ge=1, le=255)] = 1
    state: ShortText | None = None
    """As sysfs prints the name: DOWN, INIT, ARMED, ACTIVE, ACTIVE_DEFER."""
    state_id: Annotated[int, Field(ge=0, le=15)] | None = None
    phys_state: ShortText | None = None
    """As sysfs prints the name: Sleep, Polling, Disabled, PortConfigurationTraining, LinkUp…"""
    phys_state_id: Annotated[int, Field(ge=0, le=15)] | None = None
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
    d: Annotated[dict[Annotated[str, StringConstraints(max_length=64)], int], Field(
        max_length=32
    )] = {}
    """Counter deltas over this interval, keyed by counter name."""
    errors_1h: Annotated[dict[Annotated[str, StringConstraints(max_length=64)], U32], Field(
        max_length=16
    )] = {}
    """Increments over the last hour of the counters the hour-long rules read (N2's fatal ones
    and ``symbol_error``; only those that moved), counted by the agent, so a console that has
    watched for seconds judges the hour. Empty from older agents and on a clean port; the agent
    forgets it when the node is returned to service, as the console forgets its own."""


class AgentInfo(_Msg):
    version: ShortText = ""
    mode: ShortText = "sim"
    pid: U32 | None = None
    started_ts: TsMs | None = None
    collect_ms: NonNeg | None = None
    errors: Annotated[list[Text], Field(max_length=32)] = []
    event_seq: U64 | None = None
    """``seq`` of the last event this agent process emitted: lets a console notice events it
    missed (broker restart, console away) and ask for them again (``resend_events``)."""


class JobOnNode(_Msg):
    id: Id
    ranks_on_node: Annotated[int, Field(ge=0, le=64)] = 8
    step_time_ms: NonNeg | None = None


class HostSample(_Msg):
    cpu_util_pct: Pct | None = None
    mem_used_pct: Pct | None = None
    uptime_s: NonNeg | None = None


class Telemetry(_Versioned):
    """QoS 0, not retained, every ``interval_s``; latest value wins."""

    node: Id
    seq: U64
    bdSeq: U64
    ts: TsMs
    interval_s: Annotated[float, Field(gt=0, le=3600)] = 1.0
    agent: AgentInfo = AgentInfo()
    job: JobOnNode | None = None
    host: HostSample = HostSample()
    gpus: Annotated[list[GpuSample], Field(max_length=64)] = []
    ib_ports: Annotated[list[IbPortSample], Field(max_length=64)] = []


# --- events ---------------------------------------------------------------------------------


class Severity(StrEnum):
    INFO = "info"
    WARN = "warn"
    ERROR = "error"


class Event(_Versioned):
    """QoS 1, edge-triggered. ``event_id`` is unique per event so duplicates can be dropped."""

    node: Id
    event_id: Annotated[str, StringConstraints(max_length=128)]
    seq: U64
    ts: TsMs
    kind: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$", max_length=32)]
    """xid, ib_port_state, ib_flap, ecc, row_remap, nvlink, thermal, drain, agent…"""
    severity: Severity = Severity.INFO
    component: ShortText = ""
    """'gpu3', 'mlx5_ib6:1', or empty for the node as a whole."""
    message: Text = ""
    data: Annotated[dict[Annotated[str, StringConstraints(max_length=64)], Scalar], Field(
        max_length=32
    )] = {}


# --- commands and acks -----------------------------------------------------------------------


class CommandOp(StrEnum):
    DRAIN = "drain"
    RESUME = "resume"
    REBIRTH = "rebirth"
    RESTART_JOB = "restart_job"
    RESEND_EVENTS = "resend_events"
    """Re-publish this agent process's events with ``seq > args.since_seq`` (read-only op)."""
    KEYFRAME = "keyframe"
    """Send the next telemetry sample as a v2 keyframe (read-only op; docs/protocol.md)."""


class DrainMode(StrEnum):
    FINISH = "finish"
    """Slurm's DRAIN: no new work, running jobs finish, then DRAINED."""
    NOW = "now"
    """Requeue the running jobs from their last checkpoint, then DRAINED."""


class CommandArgs(_Msg):
    reason: Text = ""
    mode: DrainMode = DrainMode.FINISH
    job: Id | None = None
    since_seq: U64 | None = None


class Command(_Versioned):
    """QoS 1 from the console to one agent (``node/<n>/cmd``) or the scheduler (``sched/cmd``)."""

    cmd_id: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._-]+$", max_length=64)]
    op: CommandOp
    target: Id
    args: CommandArgs = CommandArgs()
    issued_by: ShortText
    issued_at: TsMs
    expires_at: TsMs
    reply_to: ShortText = ""
    sig: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]*$", max_length=128)] = ""
    """HMAC-SHA256 (hex) over the canonical command without ``sig`` (protocol/signing.py)."""


class AckResult(StrEnum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    DONE = "done"
    FAILED = "failed"


NOT_DRAINED = "was not drained"
"""An agent's ``done`` reason for a resume of a node that had nothing to undo."""
NOT_SAVED = "not saved on the node"
"""How an agent's ack reason says the drain state it just changed could not be written to its
``--state-dir`` (a full or read-only disk): obeyed now, forgotten by its next restart. The
console carries the clause into the command's outcome and audit record (console/commands.py)."""
RESUMED = "resumed"
"""How an agent's ``drain`` event for a resume of a drained node begins ("resumed [alice]"):
the store finds the resumes that made the hour-long port rules forget (console/store.py)."""


class Ack(_Versioned):
    """QoS 1 answer to a command: ``accepted``, then ``done``/``failed``; or ``rejected``."""

    cmd_id: Annotated[str, StringConstraints(max_length=64)]
    by: Id
    """The node (or 'sched') that answers."""
    op: CommandOp | None = None
    result: AckResult
    reason: Text = ""
    ts: TsMs


# --- jobs ------------------------------------------------------------------------------------


class JobState(StrEnum):
    """squeue's two-letter codes."""

    PD = "PD"
    R = "R"
    CG = "CG"
    CD = "CD"
    F = "F"
    NF = "NF"
    RQ = "RQ"
    CA = "CA"


class RankTime(_Msg):
    rank: Annotated[int, Field(ge=0)]
    node: Id
    step_time_ms: NonNeg


class JobStatus(_Versioned):
    """Retained, QoS 1, on ``job/<id>/status``; sent by the scheduler on change and each step."""

    job_id: Id
    name: ShortText = ""
    user: ShortText = ""
    state: JobState
    reason: Text = ""
    nodes: Annotated[list[Id], Field(max_length=4096)] = []
    nodes_wanted: Annotated[int, Field(ge=0, le=1_000_000)] | None = None
    """How many nodes the job asks for (Slurm's NumNodes): ``nodes`` is empty while it waits,
    and a job too big for the cluster waited for ever with nothing to say so."""
    gpus_per_node: Annotated[int, Field(ge=0, le=64)] = 8
    step: U64 = 0
    total_steps: U64 = 0
    step_time_ms: NonNeg | None = None
    median_step_time_ms: NonNeg | None = None
    slowest: Annotated[list[RankTime], Field(max_length=64)] = []
    """The slowest ranks of the last step, slowest first."""
    checkpoint_every: U64 = 0
    last_checkpoint_step: U64 = 0
    last_checkpoint_ts: TsMs | None = None
    submitted_ts: TsMs | None = None
    started_ts: TsMs | None = None
    eta_s: NonNeg | None = None
    requeues: U32 = 0
    step_ts: TsMs | None = None
    """When ``step`` last moved (optional): a status sent for another change (a reason set or
    cleared) moves ``ts``, and a console that dates a hang by the scheduler's clock dated it
    from that status, minutes late (a fault audit)."""
    ts: TsMs


SCHED_HEARTBEAT_S = 30.0
"""The simulated scheduler republishes its presence (``sched/status`` online) this often, live
and in the offline simulator's recordings: a console judges a job hung only while it hears the
scheduler, and weighs a birth by how far its ``ts`` lags the scheduler's newest word
(docs/protocol.md, "Scheduler status")."""


class SchedulerStatus(_Versioned):
    """Retained, QoS 1, on ``sched/status``: ``online=true`` when the scheduler (or its bridge)
    connects, and its Last Will ``online=false``. Job statuses are retained: without this a
    scheduler that died left its jobs reading ``R`` in every console, with nothing to say
    they were as of its death (docs/protocol.md, "Scheduler status")."""

    online: bool
    started: TsMs
    """The scheduler process's start (ms): which process says it (its birth, will and goodbye
    carry the same; docs/protocol.md, "Scheduler status")."""
    name: ShortText = ""
    """What runs it (``sim``, ``slurm-bridge``), for people."""
    jobs: U32 | None = None
    """Jobs it publishes right now (absent in the will)."""
    ts: TsMs


# --- collectors: sharding, digests ----------------------------------------------------------


class CollectorStatus(_Versioned):
    """Retained, QoS 1, on ``collector/<id>``: ``online=true`` when a collector starts, and its
    Last Will ``online=false`` (the broker publishes it when the collector's connection dies:
    the other collectors then take over its nodes; docs/protocol.md, "Sharded collectors")."""

    collector: Id
    online: bool
    started: TsMs
    """The collector process's start (ms): a will of an older process loses to a newer birth."""
    shard: ShortText = ""
    """What it was started with (``2/3``), for people; ownership follows the live members."""
    nodes: U32 | None = None
    """Nodes it owns right now (absent in the will)."""
    cluster_nodes: U32 | None = None
    """The cluster's nodes as it counts them: every node whose birth it heard, once one of its
    connections' retained births came whole (a retained job or scheduler status came after
    them) and stopped coming, kept through later connections; absent until then, in the will,
    and from an older collector.
    What a console on digests trusts its node count by (``FleetState.nodes_counted``:
    docs/protocol.md, "CollectorStatus")."""
    ts: TsMs


class DigestFinding(_Msg):
    rule: Annotated[str, StringConstraints(max_length=16)]
    severity: Literal["warn", "drain", "info"]
    component: ShortText = ""
    text: Text = ""


MAX_DIGEST_FINDINGS = 16


class DigestGpu(_Msg):
    """The few vitals of one GPU that the fleet-wide views show (grid cell, node row)."""

    index: Annotated[int, Field(ge=0, le=63)]
    present: bool = True
    util_pct: Pct | None = None
    temp_c: Celsius | None = None
    power_w: Annotated[float, Field(ge=0, le=5000)] | None = None
    # A GPU power-capped by software (clock-event bit 0x4) only, each left out otherwise: what
    # the raw console reads of a slow rank's GPU to say it is capped and whether its limit was
    # lowered (``judgements.PowerCap``). Without them a capped straggler read "no finding on
    # that node" on digests (docs/protocol.md, "Digests").
    power_limit_w: Annotated[float, Field(ge=0, le=5000)] | None = None
    sm_clock_mhz: Annotated[float, Field(ge=0, le=10000)] | None = None
    sm_clock_max_mhz: Annotated[float, Field(ge=0, le=10000)] | None = None
    clock_event_reasons: U64 | None = None


class DigestRecurrence(_Msg):
    """A failure that is the one before it again (``NodeState.recurred``), as its collector
    judged it: what the raw console's action and ``recurrence`` say ("the same fault (G2
    gpu0) came back 34 s after it cleared …: replace gpu0")."""

    cleared_ms: TsMs
    """When the earlier failure cleared (the collector's clock)."""
    after_s: NonNeg
    """How long it held before the fault came back."""
    findings: Annotated[list[ShortText], Field(max_length=MAX_DIGEST_FINDINGS)]
    """The fault's keys (``"G2 gpu0"``), as ``status --json``'s ``recurrence.findings``."""


class DigestPort(_Msg):
    dev: Id
    port: Annotated[int, Field(ge=1, le=255)] = 1
    up: bool
    # What the raw console reads of a port's past to tell a flapping link and a job held up
    # by it (``judgements.port_past``): sent only for a port with an N finding, each left
    # out at its default. Without them a console on digests said nothing held a job up while
    # its node's link flapped, and drew the link "erroring" (a drill; docs/protocol.md).
    downs_1h: U32 = 0
    """Link drops in the agent's own hour (``errors_1h.link_downed``)."""
    downed: bool = False
    """The link went down in the latest sample (``d.link_downed`` moved)."""
    fatal_ms: TsMs | None = None
    """When a fatal counter (N2) last moved on the port, as the collector saw it."""
    symbol_ms: TsMs | None = None
    """The collector's newest symbol error on the port in the hour (N3)."""
    first_ms: TsMs = 0
    """The collector's first sample of the port: how long it has watched the counters."""
    symbols_blind: Literal["storm", "saturated"] | None = None
    """Its symbol counter tells nothing now: saturated, or after a storm saturated it."""


class Digest(_Versioned):
    """Retained, QoS 0, on ``digest/<node>``: the owning collector's judgement of one node,
    sent when the verdict, findings, drain, job or liveness change and every few seconds
    (``DIGEST_EVERY_S``) with fresh vitals. A console on digests shows these as they are: it
    never re-judges (docs/protocol.md, "Digests")."""

    node: Id
    by: Id
    """The collector that owns the node (and sent this)."""
    ts: TsMs
    verdict: Literal["ok", "degraded", "failed", "stale", "offline"]
    findings: Annotated[list[DigestFinding], Field(max_length=MAX_DIGEST_FINDINGS)] = []
    """The findings behind the verdict, liveness first (rule ids as in docs/architecture.md)."""
    online: bool | None = None
    stopped: bool = False
    """Offline by the agent's clean goodbye (``Status.stopped``), not its will: a console on
    digests says "agents stopped cleanly", not "the network" (docs/protocol.md, "Digests").
    Absent from an older collector's digest: read as a will, as an older agent's status."""
    stale: bool = False
    drain: DrainInfo = DrainInfo()
    job: Id | None = None
    ranks_on_node: Annotated[int, Field(ge=0, le=64)] | None = None
    struck_job: Id | None = None
    """A failed node's job that its telemetry stopped naming within a minute of the failure
    (the scheduler requeued it elsewhere): the job it failed in, by which consoles group the
    nodes that failed together (docs/protocol.md, "Digest"). Absent otherwise, and from an
    older collector's digest."""
    seen: bool = True
    """False where the collector did not see a failed or degraded node's verdict change
    happen (it first heard it so: an agent restart, a silence, its own start), so a console
    on digests does not date it as a failure it watched (docs/protocol.md, "Digest"). Absent
    (true) otherwise, and from an older collector's digest."""
    gpus_expected: Annotated[int, Field(ge=0, le=64)] = 0
    gpus: Annotated[list[DigestGpu], Field(max_length=64)] = []
    ports: Annotated[list[DigestPort], Field(max_length=64)] = []
    leaf: ShortText = ""
    rack: ShortText = ""
    interval_s: Annotated[float, Field(gt=0, le=3600)] = 1.0
    last_seen_s: NonNeg | None = None
    """Age of the node's newest telemetry when the digest was made."""
    seq_gaps: U64 = 0
    every_s: Annotated[float, Field(gt=0, le=3600)] = 5.0
    """How often its collector refreshes this digest (``collect --digest-every``): consoles
    read it as stale after three periods without one."""
    shift_ms: Annotated[int, Field(ge=-2**53, le=2**53)] = 0
    """The digest's ``ts`` less the node's latest sample's (the collector's clock against its
    agent's): what its ports' past was shifted by onto the digest's clock, and what a console
    on digests shifts the node's events by to read them against that past."""
    power_limit_w: Annotated[float, Field(ge=0, le=5000)] | None = None
    """The highest power limit of the node's present GPUs: what a capped straggler's limit is
    compared with on its job's other nodes (``judgements.peer_limit_w``). Absent from an older
    collector's digest, whose GPUs carry no power cap either."""
    recurred: DigestRecurrence | None = None
    """A failed node's fault back within ``RECUR_S`` of its clearing (docs/protocol.md,
    "Digests"). Absent otherwise, and from an older collector's digest."""
    step_time_ms: NonNeg | None = None
    """The step time its job's ranks on the node last took, as its sample says it
    (``JobOnNode.step_time_ms``): what a slow node of a 2-node job is measured against on the
    other node (``judgements._other_node_time``). Absent without a job or a step time, and
    from an older collector's digest."""


MESSAGE_MODELS: dict[str, type[BaseModel]] = {
    "birth": Birth,
    "status": Status,
    "telemetry": Telemetry,
    "event": Event,
    "command": Command,
    "ack": Ack,
    "job": JobStatus,
    "scheduler": SchedulerStatus,
    "digest": Digest,
    "collector": CollectorStatus,
}


def json_schemas() -> dict[str, Any]:
    """The JSON Schema of every message, keyed by message name (``fleetdeck schema``).

    ``telemetry`` is wire v1 (``"v": 1``); ``telemetry_v2`` the columnar keyframes and deltas
    agents send by default on the same topic (docs/protocol.md): its schema is the Struct's
    the console decodes with, so the two cannot drift. A newcomer validating live traffic
    found every sample refused by ``telemetry``'s ``"v": const 1``."""
    import msgspec

    from fleetdeck.protocol import wire2

    out = {name: model.model_json_schema() for name, model in MESSAGE_MODELS.items()}
    v2 = msgspec.json.schema(wire2.TelemetryV2)
    v2["description"] = (
        "Telemetry wire v2, on the telemetry topic beside v1 (told apart by v). Beyond this "
        "schema: all columns of g (and of p) have one length; a keyframe (kf == seq) carries "
        "g.index and p.dev; kf <= seq.")
    out["telemetry_v2"] = v2
    return out
