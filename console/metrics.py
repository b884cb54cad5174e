"""Prometheus exposition of what a collector knows (``fleetdeck collect --metrics ADDR``).

History lives where operators already keep it: Prometheus scrapes the collector; fleetdeck keeps
no time-series store of its own beyond the embedded SQLite one (docs/architecture.md, "History
in Prometheus"). Names follow the exporters operators know: DCGM-exporter's ``DCGM_FI_DEV_*``
per GPU and node_exporter's ``node_infiniband_*`` per port, with the labels ``cluster``,
``node``, ``gpu`` / ``device``, ``port``; fleetdeck's own judgements (verdict, drain) and
ingest health are ``fleetdeck_*``.

The HTTP server (prometheus_client's exposition behind a small router: ``/metrics``, a pointer
at ``/``, 404 for anything else) answers on its own thread, while the fleet state belongs
to the asyncio loop: a scrape asks the loop for a snapshot (references to the nodes' immutable
latest samples, taken between two ticks) and formats from that, so a scrape never reads state
that a tick is changing and never holds the loop for longer than the copy of references.
"""

import asyncio
import math
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from fleetdeck.console.health import Verdict
from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.state import WAITING
from fleetdeck.errors import UserError
from fleetdeck.hostport import host_port

SNAPSHOT_TIMEOUT_S = 10.0
"""A scrape waits this long for the loop to hand over a snapshot, then fails (HTTP 500)."""

# (metric name, help, attribute of the GPU sample, scale). DCGM-exporter's names and units
# (docs/architecture.md, "History in Prometheus"); DCGM's counters keep their exact names.
GPU_FIELDS: tuple[tuple[str, str, str, float], ...] = (
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", "util_pct", 1.0),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", "mem_util_pct", 1.0),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", "fb_used_mib", 1.0),
    ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", "temp_c", 1.0),
    ("DCGM_FI_DEV_MEMORY_TEMP", "Memory temperature (in C).", "mem_temp_c", 1.0),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", "power_w", 1.0),
    ("DCGM_FI_DEV_POWER_MGMT_LIMIT", "Power management limit (in W).", "power_limit_w", 1.0),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
     "Total energy consumption since boot (in mJ).", "energy_j", 1000.0),
    ("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", "sm_clock_mhz", 1.0),
    ("DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", "mem_clock_mhz", 1.0),
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "Current clock event (throttle) reasons (bitmask).",
     "clock_event_reasons", 1.0),
    ("DCGM_FI_DEV_THERMAL_VIOLATION", "Throttling duration due to thermal constraints (in us).",
     "thermal_violation_ns", 1e-3),
    ("DCGM_FI_DEV_POWER_VIOLATION", "Throttling duration due to power constraints (in us).",
     "power_violation_ns", 1e-3),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "Total number of PCIe retries.", "pcie_replay_total",
     1.0),
    ("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", "xid_last", 1.0),
)
ECC_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "Total single-bit volatile ECC errors.", "sbe_vol"),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Total double-bit volatile ECC errors.", "dbe_vol"),
    ("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "Total single-bit persistent ECC errors.", "sbe_agg"),
    ("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "Total double-bit persistent ECC errors.", "dbe_agg"),
)
REMAP_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "Number of remapped rows for correctable errors.",
     "correctable"),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
     "Number of remapped rows for uncorrectable errors.", "uncorrectable"),
    ("DCGM_FI_DEV_ROW_REMAP_PENDING", "Whether a row remapping is pending (1) or not (0).",
     "pending"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "Whether remapping of rows has failed (1) or not (0).",
     "failure"),
)
NVLINK_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "NVLink flow-control CRC errors.",
     "crc_flit"),
    ("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "NVLink data CRC errors.", "crc_data"),
    ("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "NVLink retries.", "replay"),
    ("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "NVLink recovery errors.", "recovery"),
)
# node_exporter's names where it has the counter; fleetdeck_ib_* for the ones it does not read.
PORT_COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("node_infiniband_port_data_transmitted_bytes",
     "Number of data octets transmitted on all links", "xmit_bytes_total"),
    ("node_infiniband_port_data_received_bytes",
     "Number of data octets received on all links", "rcv_bytes_total"),
    ("node_infiniband_port_packets_transmitted", "Number of packets transmitted on all VLs",
     "xmit_pkts_total"),
    ("node_infiniband_port_packets_received", "Number of packets received on all VLs",
     "rcv_pkts_total"),
    ("node_infiniband_link_downed", "Number of times the link failed to recover from an error "
     "state and went down", "link_downed"),
    ("node_infiniband_link_error_recovery", "Number of times the link successfully recovered "
     "from an error state", "link_error_recovery"),
    ("node_infiniband_port_errors_received", "Number of packets containing an error that were "
     "received on this port", "rcv_errors"),
    ("node_infiniband_port_discards_transmitted", "Number of outbound packets discarded by the "
     "port because the port is down or congested", "xmit_discards"),
    ("node_infiniband_port_transmit_wait", "Number of ticks during which the port had data to "
     "transmit but no data was sent during the entire tick", "xmit_wait"),
    ("fleetdeck_ib_symbol_errors", "Minor link errors detected on one or more physical lanes "
     "(symbol_error)", "symbol_error"),
    ("fleetdeck_ib_receive_remote_physical_errors", "Packets marked with the EBP delimiter "
     "received on the port (port_rcv_remote_physical_errors)", "rcv_remote_phys_errors"),
    ("fleetdeck_ib_local_link_integrity_errors", "Times the count of local physical errors "
     "exceeded the threshold (local_link_integrity_errors)", "local_link_integrity_errors"),
    ("fleetdeck_ib_excessive_buffer_overrun_errors", "Times that OverrunErrors consecutive "
     "flow control update periods occurred (excessive_buffer_overrun_errors)",
     "excessive_buffer_overrun_errors"),
)
VERDICTS = (*(v.value for v in Verdict), WAITING)
"""As ``status`` and the views show them: ``waiting`` is a node born (or known from the store)
but not heard yet, neither ok nor failed (``NodeState.verdict_shown``)."""
DRAIN_STATES = ("none", "draining", "drained")
JOB_STATES = ("PD", "R", "CG", "CD", "F", "NF", "RQ", "CA")


@dataclass(frozen=True, slots=True)
class NodeSnap:
    node: str
    verdict: str
    online: bool
    drain: str
    last_rx: float | None
    seq_gaps: int
    telemetry: Any
    """The node's latest sample: immutable, so safe to read off the loop's thread."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    cluster: str
    nodes: list[NodeSnap]
    jobs: list[Any]
    received: int
    malformed: dict[str, int]
    applied: int
    ticks: int
    behind_s: float
    connected: bool = False
    """Whether the collector is connected to its broker now."""
    last_message_age_s: float | None = None
    """Seconds since it last received a message (None: none yet)."""


def take_snapshot(session: ConsoleSession) -> Snapshot:
    """Runs on the loop, between ticks: references only, no formatting."""
    state = session.state
    nodes = [NodeSnap(st.node_id, st.verdict_shown, bool(st.online), st.drain.state.value,
                      st.last_rx, st.seq_gaps, st.telemetry)
             for st in state.nodes.values()]
    feed = session.feed
    last = feed.last_handed if feed is not None else None
    return Snapshot(state.cluster, nodes, list(state.jobs.values()), session.ingest.received,
                    dict(state.malformed.by_reason), state.applied, session.counters.ticks,
                    state.behind_s,
                    connected=feed is not None and feed.conn.state == "connected",
                    last_message_age_s=None if last is None else max(0.0,
                                                                     session.clock() - last))


def _number(value: Any, scale: float = 1.0) -> float | None:
    if value is None:
        return None
    number = float(value) * scale
    return number if math.isfinite(number) else None


class FleetCollector(Collector):
    """A prometheus_client collector that formats a snapshot handed over by the loop."""

    def __init__(self, snapshot: Callable[[], Snapshot]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        snap = self._snapshot()
        yield from _fleet(snap)
        yield from _gpus(snap)
        yield from _ports(snap)
        yield from _jobs(snap)


def _fleet(snap: Snapshot) -> Iterator[Metric]:
    c = snap.cluster
    verdict = GaugeMetricFamily("fleetdeck_node_verdict", "The console's verdict on the node "
                                f"(1 for the current one of {', '.join(VERDICTS)})",
                                labels=["cluster", "node", "verdict"])
    drain = GaugeMetricFamily("fleetdeck_node_drain_state", "The node's drain state (1 for the "
                              "current one of none, draining, drained)",
                              labels=["cluster", "node", "state"])
    online = GaugeMetricFamily("fleetdeck_node_online", "Whether the node's agent is connected",
                               labels=["cluster", "node"])
    seen = GaugeMetricFamily("fleetdeck_node_last_seen_timestamp_seconds",
                             "When the console last received telemetry from the node",
                             labels=["cluster", "node"])
    gaps = CounterMetricFamily("fleetdeck_node_telemetry_gaps", "Telemetry samples missed "
                               "(seq gaps)", labels=["cluster", "node"])
    count: dict[str, int] = dict.fromkeys(VERDICTS, 0)
    for n in snap.nodes:
        count[n.verdict] = count.get(n.verdict, 0) + 1
        for v in VERDICTS:
            verdict.add_metric([c, n.node, v], 1.0 if n.verdict == v else 0.0)
        for d in DRAIN_STATES:
            drain.add_metric([c, n.node, d], 1.0 if n.drain == d else 0.0)
        online.add_metric([c, n.node], 1.0 if n.online else 0.0)
        if n.last_rx is not None:
            seen.add_metric([c, n.node], n.last_rx)
        gaps.add_metric([c, n.node], n.seq_gaps)
    yield from (verdict, drain, online, seen, gaps)
    nodes = GaugeMetricFamily("fleetdeck_nodes", "Nodes by verdict", labels=["cluster",
                                                                             "verdict"])
    for v, k in count.items():
        nodes.add_metric([c, v], k)
    yield nodes
    received = CounterMetricFamily("fleetdeck_messages_received", "MQTT messages received",
                                   labels=["cluster"])
    received.add_metric([c], snap.received)
    yield received
    applied = CounterMetricFamily("fleetdeck_messages_applied", "Messages applied to the fleet "
                                  "state", labels=["cluster"])
    applied.add_metric([c], snap.applied)
    yield applied
    bad = CounterMetricFamily("fleetdeck_messages_malformed", "Messages rejected, by reason",
                              labels=["cluster", "reason"])
    for reason, k in sorted(snap.malformed.items()):
        bad.add_metric([c, reason], k)
    yield bad
    ticks = CounterMetricFamily("fleetdeck_ticks", "Console ticks", labels=["cluster"])
    ticks.add_metric([c], snap.ticks)
    yield ticks
    behind = GaugeMetricFamily("fleetdeck_ingest_behind_seconds", "How far behind the live "
                               "fleet the console is (median queueing delay of the last tick)",
                               labels=["cluster"])
    behind.add_metric([c], snap.behind_s)
    yield behind
    connected = GaugeMetricFamily("fleetdeck_broker_connected", "Whether the collector is "
                                  "connected to its MQTT broker (1) or not (0)",
                                  labels=["cluster"])
    connected.add_metric([c], 1.0 if snap.connected else 0.0)
    yield connected
    age = GaugeMetricFamily("fleetdeck_broker_last_message_age_seconds", "Seconds since the "
                            "collector last received a message from its broker (absent before "
                            "the first)", labels=["cluster"])
    if snap.last_message_age_s is not None:
        age.add_metric([c], snap.last_message_age_s)
    yield age


def _gpus(snap: Snapshot) -> Iterator[Metric]:
    labels = ["cluster", "node", "gpu"]
    fams = {name: GaugeMetricFamily(name, doc, labels=labels)
            for name, doc, _a, _s in GPU_FIELDS}
    for group in (ECC_FIELDS, REMAP_FIELDS, NVLINK_FIELDS):
        for name, doc, _a in group:
            fams[name] = GaugeMetricFamily(name, doc, labels=labels)
    present = GaugeMetricFamily("fleetdeck_gpu_present", "Whether the GPU is visible to the "
                                "driver (0: fell off the bus)", labels=labels)
    free = GaugeMetricFamily("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).",
                             labels=labels)
    for n in snap.nodes:
        t = n.telemetry
        if t is None:
            continue
        for g in t.gpus:
            key = [snap.cluster, n.node, str(g.index)]
            present.add_metric(key, 1.0 if g.present else 0.0)
            for name, _doc, attr, scale in GPU_FIELDS:
                value = _number(getattr(g, attr), scale)
                if value is not None:
                    fams[name].add_metric(key, value)
            if g.fb_total_mib is not None and g.fb_used_mib is not None:
                free.add_metric(key, g.fb_total_mib - g.fb_used_mib)
            for group, part in ((ECC_FIELDS, g.ecc), (REMAP_FIELDS, g.row_remap),
                                (NVLINK_FIELDS, g.nvlink)):
                for name, _doc, attr in group:
                    value = _number(getattr(part, attr))
                    if value is not None:
                        fams[name].add_metric(key, value)
    yield present
    yield free
    yield from fams.values()


def _ports(snap: Snapshot) -> Iterator[Metric]:
    labels = ["cluster", "node", "device", "port"]
    state = GaugeMetricFamily("node_infiniband_state_id", "State of the InfiniBand port (0: no "
                              "change, 1: down, 2: init, 3: armed, 4: active, 5: act defer)",
                              labels=labels)
    phys = GaugeMetricFamily("node_infiniband_physical_state_id", "Physical state of the "
                             "InfiniBand port (0: no change, 1: sleep, 2: polling, 3: disable, "
                             "4: shift, 5: link up, 6: link error recover, 7: phytest)",
                             labels=labels)
    rate = GaugeMetricFamily("node_infiniband_rate_bytes_per_second",
                             "Maximum signal transfer rate", labels=labels)
    counters = {name: CounterMetricFamily(name, doc, labels=labels)
                for name, doc, _a in PORT_COUNTERS}
    for n in snap.nodes:
        t = n.telemetry
        if t is None:
            continue
        for p in t.ib_ports:
            key = [snap.cluster, n.node, p.dev, str(p.port)]
            if p.state_id is not None:
                state.add_metric(key, p.state_id)
            if p.phys_state_id is not None:
                phys.add_metric(key, p.phys_state_id)
            if p.rate_gbps is not None:
                rate.add_metric(key, p.rate_gbps * 125_000_000)  # Gb/s -> bytes/s, as procfs
            for name, _doc, attr in PORT_COUNTERS:
                value = _number(getattr(p, attr))
                if value is not None:
                    counters[name].add_metric(key, value)
    yield state
    yield phys
    yield rate
    yield from counters.values()


def _jobs(snap: Snapshot) -> Iterator[Metric]:
    labels = ["cluster", "job"]
    state = GaugeMetricFamily("fleetdeck_job_state", "The job's state (1 for the current "
                              "squeue code)", labels=[*labels, "state"])
    progress = GaugeMetricFamily("fleetdeck_job_progress_ratio", "Steps done / total steps",
                                 labels=labels)
    step = GaugeMetricFamily("fleetdeck_job_step", "The job's current step", labels=labels)
    step_time = GaugeMetricFamily("fleetdeck_job_step_time_seconds", "The last step's time",
                                  labels=labels)
    requeues = GaugeMetricFamily("fleetdeck_job_requeues", "Times the job was requeued",
                                 labels=labels)
    for job in snap.jobs:
        key = [snap.cluster, job.job_id]
        for s in JOB_STATES:
            state.add_metric([*key, s], 1.0 if job.state.value == s else 0.0)
        if job.total_steps:
            progress.add_metric(key, min(1.0, job.step / job.total_steps))
        step.add_metric(key, job.step)
        if job.step_time_ms is not None:
            step_time.add_metric(key, job.step_time_ms / 1000)
        requeues.add_metric(key, job.requeues)
    yield from (state, progress, step, step_time, requeues)


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT`` (all interfaces) or ``PORT`` (loopback)."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host = "127.0.0.1"
    try:
        number = int(port)
    except ValueError:
        raise UserError(f"--metrics '{text}' is not HOST:PORT, :PORT or PORT.") from None
    if not 0 <= number <= 65535:
        # A number, but no port: "is not HOST:PORT" of ':99999' read as a syntax error (a
        # review). 0 is any free port, the address printed once it listens.
        raise UserError(f"--metrics '{text}': port {number} is out of range (0 to 65535).")
    return (host.strip("[]") or "0.0.0.0"), number


METRICS_PATH = "/metrics"

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def routed(exposition: WSGIApp, cluster: str) -> WSGIApp:
    """``/metrics`` is the exposition; ``/`` a one-line pointer to it (someone opened the bare
    address in a browser); anything else 404. prometheus_client's own server answered every
    path with the metrics, so a typo in a scrape config still "worked"."""
    pointer = (f"fleetdeck collector for cluster {cluster}: Prometheus metrics are at "
               f"{METRICS_PATH}\n").encode()
    missing = f"not found; Prometheus metrics are at {METRICS_PATH}\n".encode()

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO") or "/"
        if path == METRICS_PATH:
            return exposition(environ, start_response)
        status, body = ("200 OK", pointer) if path == "/" else ("404 Not Found", missing)
        start_response(status, [("Content-Type", "text/plain; charset=utf-8"),
                                ("Content-Length", str(len(body)))])
        return [] if environ.get("REQUEST_METHOD") == "HEAD" else [body]

    return app


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a slow scraper must not keep the collector from exiting


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per scrape on stderr would bury collect's own progress lines


def serve_metrics(session: ConsoleSession, listen: str,
                  loop: asyncio.AbstractEventLoop) -> tuple[str, int]:
    """Start the exposition endpoint for ``session``; return the address it listens on."""
    host, port = parse_listen(listen)

    async def snap() -> Snapshot:
        return take_snapshot(session)

    def snapshot() -> Snapshot:
        return asyncio.run_coroutine_threadsafe(snap(), loop).result(SNAPSHOT_TIMEOUT_S)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(FleetCollector(snapshot))
    server_class: type[_Server] = _Server
    if ":" in host:
        server_class = type("_Server6", (_Server,), {"address_family": socket.AF_INET6})
    try:
        server = make_server(host, port, routed(make_wsgi_app(registry), session.cluster),
                             server_class, handler_class=_Quiet)
    except OSError as err:
        raise UserError(f"cannot serve metrics on {host_port(host, port)}: "
                        f"{err.strerror or err}.") from None
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    bound_host, bound_port = server.server_address[:2]
    return str(bound_host), int(bound_port)
