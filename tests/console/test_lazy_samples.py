"""Quiet v2 samples whose rows are never built (``wire2.Pending``) give every consumer what the
built sample gives: the sparkline rings and the store's minute rows read their columns instead
(issue 12: a console need not build and free 16 rows a sample that no rule reads)."""

from fleetdeck.console.ingest import Ingest
from fleetdeck.console.recent import RecentHistory
from fleetdeck.console.store import Downsampler
from fleetdeck.protocol import codec, wire2
from fleetdeck.protocol.topics import Kind
from tests.helpers import FakeNode


def _samples(seconds: int) -> list[tuple[wire2.Sample, wire2.Sample]]:
    """(lazy, eager) of the same v2 stream: a busy node and an idle one, past a minute."""
    nodes = [FakeNode("gpu0001"), FakeNode("gpu0002")]
    lazy, eager = Ingest(nodes[0].cluster), Ingest(nodes[0].cluster, lazy=False)
    encoders = {n.node_id: wire2.TelemetryEncoder(30) for n in nodes}
    out = []
    for _ in range(seconds):
        for node in nodes:
            payload = encoders[node.node_id].encode(
                codec.decode_telemetry(codec.encode(node.telemetry())), node.now)
            for ing in (lazy, eager):
                ing.handle(node.topic(Kind.TELEMETRY), payload, node.now)
        a, b = lazy.take_batch(), eager.take_batch()
        out += [(a.telemetry[n][1], b.telemetry[n][1]) for n in sorted(a.telemetry)]
    return out


def test_the_stream_is_mostly_unbuilt_samples() -> None:
    pairs = _samples(20)
    assert sum(type(a) is wire2.Pending for a, _ in pairs) > len(pairs) // 2
    assert all(type(b) is not wire2.Pending for _, b in pairs)


def test_sparklines_from_columns_equal_those_from_rows() -> None:
    lazy, eager = RecentHistory(), RecentHistory()
    for a, b in _samples(70):
        lazy.record(a.node, a)
        eager.record(b.node, b)
        if type(a) is wire2.Pending:
            assert not a.built, "recording a sparkline built the rows"
    for node in ("gpu0001", "gpu0002"):
        for pos in range(8):
            for metric in ("util", "temp", "power"):
                series = lazy.series(node, pos, metric)
                assert series == eager.series(node, pos, metric)
                assert len(series) == 60 and any(v is not None for v in series)


def test_store_minutes_from_columns_equal_those_from_rows() -> None:
    lazy, eager = Downsampler(), Downsampler()
    rows_a, rows_b = [], []
    for a, b in _samples(130):  # two minute boundaries
        rows_a.append(lazy.add(a))
        rows_b.append(eager.add(b))
        if type(a) is wire2.Pending:
            assert not a.built, "the store built the rows"
    assert rows_a == rows_b
    assert sum(len(g) + len(p) for g, p in rows_a) >= 2 * 2 * 16  # rows were emitted


def test_a_collectors_digests_from_columns_equal_those_from_rows() -> None:
    """A collector digests every node every few seconds (console/digest.py): from an unbuilt
    sample's columns, the same digest as from its rows, and no rows built."""
    from fleetdeck.console.digest import DigestSender, make_digest
    from fleetdeck.console.state import FleetState

    nodes = [FakeNode(f"gpu{i:04d}") for i in range(1, 4)]
    ingests = {lz: Ingest(nodes[0].cluster, lazy=lz) for lz in (True, False)}
    states = {lz: FleetState(nodes[0].cluster) for lz in (True, False)}
    encoders = {n.node_id: wire2.TelemetryEncoder(30) for n in nodes}
    for n in nodes:
        for ing in ingests.values():
            n.feed(ing, n.birth(), Kind.BIRTH)
            n.feed(ing, n.status(), Kind.STATUS)
    for _ in range(4):
        for n in nodes:
            payload = encoders[n.node_id].encode(
                codec.decode_telemetry(codec.encode(n.telemetry())), n.now)
            for ing in ingests.values():
                ing.handle(n.topic(Kind.TELEMETRY), payload, n.now)
        for lz, ing in ingests.items():
            states[lz].apply(ing.take_batch(), nodes[0].now)
    now = nodes[0].now
    lazy, eager = states[True].nodes, states[False].nodes
    assert all(type(st.sample) is wire2.Pending for st in lazy.values())
    assert DigestSender("c1").due(lazy, now)  # the sender looks at every node
    for name, st in lazy.items():
        assert make_digest(st, "c1", now) == make_digest(eager[name], "c1", now)
        assert type(st.sample) is wire2.Pending and not st.sample.built, name


def test_node_list_metrics_from_columns_equal_those_from_rows() -> None:
    """``rows.metrics`` (the UTIL/TEMP/POWER columns and their sorts) of a quiet sample, read
    from its columns (healthy nodes take a shortcut), equal those of the built sample, and
    keep their type; a GPU gone or not reporting takes the per-GPU path."""
    import msgspec

    from fleetdeck.console.rows import metrics
    from fleetdeck.console.state import NodeState

    pairs = [(a, b) for a, b in _samples(20) if type(a) is wire2.Pending]
    assert pairs
    for a, b in pairs:
        got, want = metrics(NodeState(a.node, sample=a)), metrics(NodeState(b.node, sample=b))
        assert got == want and list(map(type, got)) == list(map(type, want))
        assert not a.built
    # The per-GPU path: a GPU missing, a GPU without a reading.
    _a, b = pairs[0]
    gpus = list(b.gpus)
    gpus[2] = msgspec.structs.replace(gpus[2], present=False)
    gpus[3] = msgspec.structs.replace(gpus[3], util_pct=None, power_w=None)
    odd = msgspec.structs.replace(b, gpus=gpus)
    u, t, p = metrics(NodeState(b.node, sample=odd))
    present = [g for g in gpus if g.present]
    assert u == sum(g.util_pct for g in present if g.util_pct is not None) / 6
    assert t == max(g.temp_c for g in present if g.temp_c is not None)
    assert p == sum(g.power_w for g in present if g.power_w is not None)


def test_gpu_and_port_counts_from_columns_equal_those_from_rows() -> None:
    """What the fleet totals and the IB column count (GPUs present, ports up) of a quiet
    sample comes from its columns: the rows stay unbuilt (18 µs a node when they were built)."""
    import msgspec

    from fleetdeck.console.state import NodeState

    pairs = [(a, b) for a, b in _samples(20) if type(a) is wire2.Pending]
    assert pairs
    for a, b in pairs:
        lazy, eager = NodeState(a.node, sample=a), NodeState(b.node, sample=b)
        assert (lazy.gpus_present, lazy.ib_ports_up) == (eager.gpus_present, eager.ib_ports_up)
        assert not a.built
    # A GPU gone and a port down count as such from the rows.
    _a, b = pairs[0]
    gpus, ports = list(b.gpus), list(b.ib_ports)
    gpus[1] = msgspec.structs.replace(gpus[1], present=False)
    ports[4] = msgspec.structs.replace(ports[4], state="DOWN", phys_state="Polling")
    odd = NodeState(b.node, sample=msgspec.structs.replace(b, gpus=gpus, ib_ports=ports))
    assert (odd.gpus_present, odd.ib_ports_up) == (len(gpus) - 1, len(ports) - 1)


def test_the_session_reads_each_samples_metrics_as_it_applies_it() -> None:
    """The node list's UTIL/TEMP/POWER of 16,384 nodes are read where the session applied the
    samples (``NodeState.metered``), not from samples scattered over memory later; a new sample
    is read anew."""
    from fleetdeck.console.rows import _metrics_of, metrics
    from fleetdeck.console.session import ConsoleSession

    node = FakeNode("gpu0001")
    ingest = Ingest(node.cluster)
    session = ConsoleSession(node.cluster, ingest=ingest, follow_up=False,
                             clock=lambda: node.now)
    encoder = wire2.TelemetryEncoder(30)
    ingest.handle(node.topic(Kind.BIRTH), codec.encode(node.birth()), node.now)
    seen = []
    quiet = 0
    for _ in range(5):
        payload = encoder.encode(codec.decode_telemetry(codec.encode(node.telemetry())),
                                 node.now)
        ingest.handle(node.topic(Kind.TELEMETRY), payload, node.now)
        session.tick(node.now)
        st = session.state.nodes[node.node_id]
        quiet += type(st.sample) is wire2.Pending and not st.sample.built
        held, figures = st.metered_for, st.metered
        assert held is st.sample and figures == _metrics_of(wire2.full(st.sample))
        assert metrics(st) is figures  # read from the cache
        seen.append(figures)
    assert len(set(seen)) > 1, "a busy node's figures move with its samples"
    assert quiet >= 3, "the quiet samples' path (columns, no rows) was not taken"
