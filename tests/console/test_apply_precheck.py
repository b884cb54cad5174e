"""The "still healthy?" pre-check gives exactly the verdicts and findings of the full rules.

``still_healthy`` may only answer True when ``evaluate`` finds nothing; the fleet state skips
the rules on that answer. Checked on every fault the simulator can inject (agents/sim), on
random mutations of every rule input (hypothesis), and end to end: two fleet states, one with
the pre-check and one without, fed the same stream, agree on every node at every tick.
"""

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetdeck.console.health import NodeHistory, evaluate, still_healthy
from fleetdeck.console.ingest import Batch
from fleetdeck.console.state import FleetState
from fleetdeck.protocol import codec
from fleetdeck.protocol.ib_counters import HOUR_COUNTED
from fleetdeck.protocol.messages import Telemetry
from tests.helpers import FakeNode
from tests.sim.harness import Harness, act, job

TRAIN = job("train", nodes=16, steps=100_000)

# Every fault kind of agents/sim/spec.py KINDS, some twice with other parameters, plus the
# recoveries (timed and repair) so windows are seen expiring back to healthy.
SCENARIO = [
    TRAIN,
    act("ib_flap", 5, node="gpu0001", port=3, count=4, down=2, every=5),
    act("link_down", 6, node="gpu0002", port=1, duration="20s"),
    act("symbol_storm", 7, node="gpu0003", port=6, rate=200, duration="15s"),
    act("leaf_switch", 8, node="gpu0016", rail=2, duration="10s"),
    act("xid79", 9, node="gpu0004", gpu=5),
    act("xid", 10, node="gpu0005", gpu=2, code=48),
    act("xid", 11, node="gpu0006", gpu=1, code=94),
    act("xid", 12, node="gpu0007", gpu=0, code=13, then="45"),
    act("xid", 13, node="gpu0008", gpu=3, code=119, then="45"),
    act("ecc_dbe", 14, node="gpu0009", gpu=4),
    act("ecc_dbe", 15, node="gpu0010", gpu=6, remap_failure=True),
    act("nvlink", 17, node="gpu0013", gpu=6, links=2),
    act("pcie_replay", 18, node="gpu0014", gpu=0, per_min=120, duration="70s"),
    # Saturates the 16-bit counter in ~7 s (N3 held, N6), cleared by the repair.
    act("symbol_storm", 20, node="gpu0012", port=4, rate=10_000, duration="30s"),
    act("repair", 70, node="gpu0012"),
    act("agent_death", 19, node="gpu0015"),
    act("node_death", 60, node="gpu0010"),
    act("agent_restart", 40, node="gpu0015"),
    act("repair", 45, node="gpu0004"),
    act("repair", 46, node="gpu0013"),
    act("repair", 95, node="gpu0010"),
]

# A GPU heats up only under load: with the job of SCENARIO broken by its faults, thermal faults
# get a fleet of their own.
THERMAL = [
    TRAIN,
    act("thermal", 5, node="gpu0003", gpu=2, temp=92),
    act("thermal", 5, node="gpu0004", gpu=1, temp=88, clock_mhz=1200, duration="50s"),
    act("repair", 80, node="gpu0003"),
]


def _precheck_vs_rules(h: Harness, ticks: int) -> tuple[int, int, set[str]]:
    hits = faulty = 0
    rules: set[str] = set()
    for _ in range(ticks):
        for name, t in h.tick().items():
            full = h.findings[name]
            rules |= {f.rule for f in full}
            faulty += bool(full)
            if still_healthy(h.births[name], t, h.hist[name]):
                hits += 1
                assert full == [], (name, t.seq, full)
    return hits, faulty, rules


def test_precheck_never_hides_a_finding_of_any_simulated_fault() -> None:
    hits, faulty, rules = _precheck_vs_rules(Harness(nodes=16, actions=SCENARIO), 130)
    t_hits, t_faulty, t_rules = _precheck_vs_rules(Harness(nodes=16, actions=THERMAL), 100)
    hits, faulty, rules = hits + t_hits, faulty + t_faulty, rules | t_rules
    # The comparison was not vacuous: faults fired, and healthy samples took the fast path.
    assert {"G1", "G2", "G3", "G4", "G5", "G9", "G11", "G12", "G13", "N1", "N3", "N6"} <= rules
    assert faulty > 200
    assert hits > 1000


def test_precheck_takes_the_fast_path_for_healthy_nodes() -> None:
    h = Harness(nodes=8, actions=[job("t", nodes=8, steps=100_000)])
    healthy = hits = 0
    for _ in range(20):
        for name, t in h.tick().items():
            if h.findings[name] == []:
                healthy += 1
                hits += still_healthy(h.births[name], t, h.hist[name])
    assert healthy > 100
    assert hits == healthy  # no healthy sample of a training fleet needs the full rules


def _feed(state: FleetState, births: dict[str, Any], tel: dict[str, Telemetry],
          now: float) -> None:
    b = Batch()
    for name, birth in births.items():
        b.births[name] = (now, birth)
        b.messages += 1
    for name, t in tel.items():
        b.telemetry[name] = (now, t)
        b.messages += 1
    state.apply(b, now)


def test_fleet_state_with_precheck_judges_exactly_as_without() -> None:
    h = Harness(nodes=16, actions=SCENARIO)
    fast, full = FleetState("t"), FleetState("t")
    full.precheck = False
    for s in (fast, full):
        _feed(s, h.births, {}, h.now)
    compared = 0
    for _ in range(90):
        tel = h.tick()
        for s in (fast, full):
            _feed(s, {}, tel, h.now)
        for name, a in fast.nodes.items():
            b = full.nodes[name]
            assert (a.verdict, a.findings, a.liveness, a.shape, a.shape_rev) == (
                b.verdict, b.findings, b.liveness, b.shape, b.shape_rev), name
            compared += 1
        assert fast.take_transitions() == full.take_transitions()
    assert compared == 90 * 16


# --- random inputs to every rule --------------------------------------------------------------

_BASE = FakeNode()
_BIRTH = _BASE.birth()
_SAMPLES = [json.loads(codec.encode(_BASE.telemetry())) for _ in range(2)]

GPU_EDITS: list[tuple[tuple[str, ...], st.SearchStrategy[Any]]] = [
    (("present",), st.booleans()),
    (("temp_c",), st.one_of(st.none(), st.floats(20, 100))),
    (("clock_event_reasons",), st.one_of(st.none(), st.integers(0, 0x1FF))),
    (("ecc", "dbe_vol"), st.one_of(st.none(), st.integers(0, 3))),
    (("ecc", "sram_unc_agg"), st.one_of(st.none(), st.integers(0, 2))),
    (("ecc", "sram_corr_agg"), st.one_of(st.none(), st.integers(9_990, 10_010))),
    (("row_remap", "failure"), st.one_of(st.none(), st.booleans())),
    (("row_remap", "pending"), st.one_of(st.none(), st.booleans())),
    (("row_remap", "uncorrectable"), st.one_of(st.none(), st.integers(500, 520))),
    (("nvlink", "links_up"), st.one_of(st.none(), st.integers(15, 18))),
    (("nvlink", "replay"), st.integers(0, 3)),
    (("nvlink", "crc_flit"), st.integers(0, 300)),
    (("pcie_replay_total",), st.integers(0, 100)),
    (("thermal_violation_ns",), st.integers(0, 3)),
    (("xid_last",), st.one_of(st.none(), st.sampled_from([13, 45, 48, 79, 94, 119]))),
    (("pcie_replay_1m",), st.one_of(st.none(), st.integers(30, 33))),
    # Before or after the sample's time (so the console's watch), in the minute or past it.
    (("throttled_last_ts",), st.one_of(st.none(), st.integers(0, 2**41))),
    (("throttled_last_reasons",), st.one_of(st.none(), st.sampled_from([0, 0x1, 0x20, 0x80]))),
    (("hot_last_ts",), st.one_of(st.none(), st.integers(0, 2**41))),
]
PORT_EDITS: list[tuple[tuple[str, ...], st.SearchStrategy[Any]]] = [
    (("state",), st.sampled_from(["ACTIVE", "DOWN", "INIT"])),
    (("phys_state",), st.sampled_from(["LinkUp", "Polling", "Disabled"])),
    (("rate_gbps",), st.one_of(st.none(), st.sampled_from([400.0, 200.0]))),
    (("carrier_losses_24h",), st.one_of(st.none(), st.integers(0, 6))),
    (("symbol_error",), st.one_of(st.integers(0, 200), st.integers(0xFFFD, 0xFFFF))),
    (("link_error_recovery",), st.one_of(st.integers(0, 8), st.just(0xFF))),
    (("rcv_errors",), st.one_of(st.integers(0, 2), st.just(0xFFFF))),
    (("link_downed",), st.one_of(st.integers(0, 1), st.just(0xFF))),
    (("rnr_nak_retry_err",), st.integers(0, 1)),
    (("errors_1h",), st.dictionaries(st.sampled_from((*HOUR_COUNTED, "rcv_errors")),
                                     st.integers(0, 125), max_size=5)),
]


@st.composite
def edits(draw: st.DrawFn) -> list[tuple[int, str, int, tuple[str, ...], Any]]:
    out = []
    for _ in range(draw(st.integers(0, 4))):
        which = draw(st.sampled_from(["gpus", "ib_ports"]))
        table = GPU_EDITS if which == "gpus" else PORT_EDITS
        path, values = draw(st.sampled_from(table))
        out.append((draw(st.integers(0, 1)), which, draw(st.integers(0, 7)), path,
                    draw(values)))
    return out


def _set(doc: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        doc = doc.setdefault(key, {})
    doc[path[-1]] = value


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edits(), st.booleans())
def test_precheck_agrees_with_the_rules_on_random_inputs(
        changes: list[tuple[int, str, int, tuple[str, ...], Any]], xid_list: bool) -> None:
    docs = json.loads(json.dumps(_SAMPLES))
    for sample, which, index, path, value in changes:
        items = docs[sample][which]
        _set(items[index % len(items)], path, value)
    if xid_list and docs[1]["gpus"][0].get("xid_last") is not None:
        ts = docs[1]["ts"]
        docs[1]["gpus"][0]["xid_last_ts"] = ts - 1000
        docs[1]["gpus"][0]["xids"] = [{"code": docs[1]["gpus"][0]["xid_last"], "ts": ts - 1000}]
    try:
        samples = [codec.decode(Telemetry, json.dumps(d).encode()) for d in docs]
    except codec.DecodeError:
        return  # an edit the protocol refuses never reaches the rules
    hist = NodeHistory()
    for t in samples:
        hist.update(t)
    full = evaluate(_BIRTH, samples[-1], hist)
    fast = still_healthy(_BIRTH, samples[-1], hist)
    if fast:
        assert full == []
    t = samples[-1]
    plain = all(g.present and not g.xids and g.xid_last is None for g in t.gpus)
    if full == [] and plain:
        assert fast  # the pre-check is exact wherever it can be: no needless full evaluation
