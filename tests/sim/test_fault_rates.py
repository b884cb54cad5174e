"""Fault rate tables: parsing, the seeded Poisson schedule, and a two-day run in virtual time
replayed headless through the console, whose interruptions by cause must match the table."""

import gzip
import json
import math
import time
from collections import Counter
from pathlib import Path

import pytest

from fleetdeck.agents.sim.offline import SEGMENT_S, OfflineOptions, run_offline, submitted_names
from fleetdeck.agents.sim.rates import (
    BUILTIN_CAUSES,
    CLASSES,
    RatesError,
    expected,
    load_rates,
    parse_rates,
    parse_span,
    schedule,
)
from fleetdeck.agents.sim.topology import node_names
from fleetdeck.agents.sim.world import WorldOptions
from fleetdeck.cli import main
from fleetdeck.console.recording import RecordingWriter
from tests.conftest import run_cli, spawn, stop_process


@pytest.mark.parametrize(("table", "message"), [
    ({}, r"no \[rates\] table"),
    ({"rates": {}}, "empty"),
    ({"rates": {"gpu_meteor": 0.1}}, r"\[rates\] gpu_meteor: unknown cause \(built in: "),
    ({"rates": {"gpu_xid79": -0.002}}, "cannot be negative"),
    ({"rates": {"gpu_xid79": "often"}}, "must be a number of failures per node-day"),
    ({"rates": {"gpu_xid79": True}}, "must be a number of failures per node-day"),
    ({"rates": {"gpu_xid79": 100_000}}, "more than 86400"),
    ({"rates": {"gpu_xid79": {"per_node_day": math.inf}}}, "per_node_day must be a number"),
    ({"rates": {"mine": {"per_node_day": 0.1, "fault": "meteor"}}}, "unknown fault kind"),
    ({"rates": {"mine": {"per_node_day": 0.1, "fault": "submit"}}}, "is not a failure"),
    ({"rates": {"mine": {"per_node_day": 0.1, "fault": "xid"}}}, "'code' is required"),
    ({"rates": {"mine": {"per_node_day": 0.1, "fault": "xid", "code": 2000}}},
     r"code must be in \[1, 999\]"),
    ({"rates": {"gpu_xid79": {"per_node_day": 0.1, "node": "gpu0001"}}}, "cannot be set"),
    ({"rates": {"gpu_xid79": {"per_node_day": 0.1, "repair": "soon"}}}, "repair must be"),
    ({"rates": {"gpu_xid79": {"per_node_day": 0.1, "counts_as": "cosmic"}}}, "counts_as"),
    ({"rates": {"gpu_xid79": 0.1}, "fleet": {"nodes": 0}}, "nodes must be"),
    ({"rates": {"gpu_xid79": 0.1}, "extra": 1}, "unknown top-level"),
])
def test_bad_tables_are_refused_in_one_sentence(table, message):
    with pytest.raises(RatesError, match=message) as err:
        parse_rates(table)
    assert "\n" not in str(err.value)


def test_bad_files_and_spans_from_the_command_line(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("[rates]\ngpu_xid79 = -1\n")
    assert main(["sim", "--fault-rates", str(bad), "--out", str(tmp_path / "x.jsonl.gz"),
                 "--duration", "1d"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot be negative" in err and str(bad) in err
    broken = tmp_path / "broken.toml"
    broken.write_text("[rates\n")
    with pytest.raises(RatesError, match="not valid TOML"):
        load_rates(str(broken))
    with pytest.raises(RatesError, match="no built-in rate table 'nope'"):
        load_rates("nope")
    assert main(["sim", "--out", str(tmp_path / "x.jsonl.gz")]) == 2
    assert "--out and --duration go together" in capsys.readouterr().err
    spread = tmp_path / "spread.jsonl.gz"
    assert main(["sim", "--procs", "2", "--out", str(spread), "--duration", "1m"]) == 2
    err = capsys.readouterr().err
    assert "--procs spreads a live simulator's agents" in err and err.count("\n") == 1, err
    assert not spread.exists()
    nowhere = tmp_path / "no" / "such" / "dir.jsonl.gz"
    assert main(["sim", "--nodes", "4", "--out", str(nowhere), "--duration", "1h"]) == 2
    err = capsys.readouterr().err
    assert f"folder {nowhere.parent} does not exist" in err and str(nowhere) in err
    assert err.count("\n") == 1
    assert (parse_span("7d"), parse_span("36h"), parse_span("1d12h")) == (
        604800, 129600, 129600)
    for bad_span in ("0d", "soon", "-1d"):
        with pytest.raises(RatesError, match="span"):
            parse_span(bad_span)


def test_builtin_causes_and_the_week_table():
    table = parse_rates({"rates": dict.fromkeys(BUILTIN_CAUSES, 0.001)})
    kinds = {c.name: (c.fault, c.counts_as) for c in table.causes}
    assert kinds["gpu_xid79"] == ("xid79", "gpu")
    assert kinds["hbm_dbe"] == ("ecc_dbe", "hbm_ecc")
    assert kinds["hbm_uncontained"] == ("xid", "hbm_ecc")
    assert kinds["gpu_gsp"] == ("xid", "gpu")
    assert kinds["ib_link_down"] == ("link_down", "network")
    assert kinds["node_power_loss"] == ("node_death", "host")
    assert kinds["app_crash"] == ("xid", "software")
    for harmless in ("agent_crash", "gpu_thermal", "ib_flap", "gpu_nvlink"):
        assert kinds[harmless][1] is None
    own = parse_rates({"rates": {"contained": {"per_node_day": 0.01, "fault": "xid", "code": 94,
                                               "then": [63], "counts_as": "hbm_ecc"}}})
    assert own.causes[0].counts_as == "hbm_ecc" and own.causes[0].params["then"] == "63"
    week = load_rates("rates-week")
    assert week.scenario.nodes == 1024
    assert sum(int(a.get("nodes")) for a in week.scenario.actions if a.kind == "submit") == 960
    assert 0.002 < sum(c.per_node_day for c in week.causes if c.counts_as) < 0.006


def test_schedule_is_poisson_seeded_and_repairs_what_it_breaks():
    table = parse_rates({"rates": {"gpu_xid79": 0.05, "ib_link_down": 0.02,
                                   "agent_crash": 0.01, "gpu_nvlink": 0}})
    nodes = node_names(200, "gpu")
    days = 20
    a = schedule(table, nodes, seed=4, until_s=days * 86400)
    assert a.actions == schedule(table, nodes, seed=4, until_s=days * 86400).actions
    assert a.actions != schedule(table, nodes, seed=5, until_s=days * 86400).actions
    counts = Counter(f.cause.name for f in a.faults)
    for cause, rate in (("gpu_xid79", 0.05), ("ib_link_down", 0.02), ("agent_crash", 0.01)):
        mean = rate * len(nodes) * days
        assert abs(counts[cause] - mean) < 4 * math.sqrt(mean), (cause, counts[cause], mean)
    assert "gpu_nvlink" not in counts
    gaps = sorted(f.action.at for f in a.faults if f.cause.name == "gpu_xid79")
    mean_gap = 86400 / (0.05 * len(nodes))
    assert abs((gaps[-1] - gaps[0]) / (len(gaps) - 1) - mean_gap) < 0.2 * mean_gap
    assert len({f.action.get("gpu") for f in a.faults if f.action.kind == "xid79"}) == 8
    assert len({f.action.get("node") for f in a.faults}) > 100
    follow = Counter((x.kind, x.get("node"), round(x.at)) for x in a.actions
                     if x.kind in ("repair", "agent_restart"))
    for f in a.faults:
        then = "agent_restart" if f.action.kind == "agent_death" else "repair"
        assert follow[(then, f.action.get("node"),
                       round(f.action.at + (f.cause.repair_s or 0)))] >= 1
    # An agent a repair brought back in the meantime is left be, not restarted again.
    assert all(x.get("only_dead") for x in a.actions if x.kind == "agent_restart")
    # Adding a cause leaves the others' faults where they were.
    more = parse_rates({"rates": {"gpu_xid79": 0.05, "ib_link_down": 0.02, "agent_crash": 0.01,
                                  "hbm_dbe": 0.3}})
    again = schedule(more, nodes, seed=4, until_s=days * 86400)
    assert [f.action for f in again.faults if f.cause.name == "gpu_xid79"] == [
        f.action for f in a.faults if f.cause.name == "gpu_xid79"]


TWO_DAYS = """
[fleet]
nodes = 128
[[job]]
name = "big"
nodes = 64
steps = 1000000
checkpoint_every = 300
step_time = "1.5s"
[[job]]
name = "mid"
nodes = 32
steps = 1000000
checkpoint_every = 200
step_time = "1.2s"
[[job]]
name = "small"
nodes = 16
steps = 1000000
checkpoint_every = 100
step_time = "1s"
[rates]                  # high, so that two days give dozens of interruptions
gpu_xid79 = 0.03
gpu_gsp = 0.015
hbm_dbe = 0.02
hbm_uncontained = 0.015
ib_link_down = 0.025
node_power_loss = 0.025
agent_crash = 0.03       # interrupts nothing: the ranks keep running
gpu_thermal = 0.03       # a straggler, not an interruption
gpu_nvlink = 0
app_crash = 0            # so every interruption must be explained by a node: 'software' is 0
"""


def test_two_days_replayed_headless_match_the_table(tmp_path, capsys):
    """128 nodes for 2 days in virtual time into a recording; `fleetdeck replay --headless`
    judges every interruption; counts by cause are checked against the table (Poisson) and
    against the faults the simulator knows it placed on busy nodes."""
    path = tmp_path / "rates.toml"
    path.write_text(TWO_DAYS)
    table = load_rates(str(path))
    sc = table.scenario
    nodes = node_names(128, "gpu")
    duration = 2 * 86400
    drawn = schedule(table, nodes, seed=11, until_s=duration)
    timeline = sorted([*sc.actions, *drawn.actions], key=lambda a: a.at)
    out = tmp_path / "two-days.jsonl.gz"
    stats = run_offline(
        OfflineOptions(cluster="rates", duration_s=duration,
                       world=WorldOptions(nodes=128, seed=11, epoch_ms=1_790_000_000_000)),
        lambda started: RecordingWriter(out, "rates", started=started, segment_s=SEGMENT_S),
        timeline, faults=drawn.faults, restart_jobs=submitted_names(sc.actions))
    size = out.stat().st_size
    assert size < 8 * 2**20, size
    # Sparse: far fewer samples than 1 Hz (22 million), yet every node reported regularly.
    assert 128 * duration / 10_500 <= stats.telemetry < 128 * duration / 2000

    assert main(["replay", str(out), "--headless", "--summary-json", "--tick", "10"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["replay"]["skipped_lines"] == 0
    assert summary["totals"]["nodes"] == 128 and summary["totals"]["by_verdict"]["stale"] == 0
    seen = Counter(it["cause"] for it in summary["interruptions"])
    want = expected(table, stats.busy_node_days)
    assert sum(seen.values()) >= 24, seen
    for cause in CLASSES:
        tolerance = 4 * math.sqrt(want[cause]) + 2
        assert abs(seen[cause] - want[cause]) <= tolerance, (cause, seen, want)
    assert seen["software"] == 0 and seen["operator"] == 0, seen
    # Tighter: the faults that hit a running job, by the class the table says they count as.
    truth: Counter[str] = Counter()
    for c in table.causes:
        if c.counts_as:
            truth[c.counts_as] += stats.faults_on_busy.get(c.name, 0)
    for cause in CLASSES:
        assert abs(seen[cause] - truth[cause]) <= max(2, 0.2 * truth[cause]), (seen, truth)
    assert stats.faults.get("agent_crash", 0) > 0 and "gpu_nvlink" not in stats.faults
    # Each interruption names the node it blames, one that a fault of its class hit.
    hit = {(f.cause.counts_as, f.action.get("node")) for f in drawn.faults}
    blamed = [(it["cause"], node) for it in summary["interruptions"] for node in it["nodes"]]
    assert sum(b in hit for b in blamed) >= 0.9 * len(blamed)


def test_the_cli_runs_a_table_offline(tmp_path, capsys):
    path = tmp_path / "rates.toml"
    path.write_text(TWO_DAYS.replace("nodes = 128", "nodes = 80"))
    out = tmp_path / "cli.jsonl.gz"
    assert main(["sim", "--fault-rates", str(path), "--out", str(out), "--duration", "6h",
                 "--seed", "2", "--cluster", "off"]) == 0
    err = capsys.readouterr().err
    # The span as typed: it said "for 0.25 days" (and "0.0833333 days" of a 2 h run).
    assert "simulated 80 nodes for 6 h" in err and "expected interruptions" in err
    assert "gpu_xid79: 0.03/node-day -> xid79 (repair 6h, counts as gpu)" in err
    with gzip.open(out) as f:
        head = json.loads(f.readline())
    assert head["cluster"] == "off" and head["fleetdeck_recording"] == 1
    assert Path(f"{out}.idx").is_file()


def test_a_live_sim_draws_its_faults_from_the_table(mosquitto, tmp_path):
    """`fleetdeck sim --fault-rates` over a real broker: at a demo's rate (8 nodes, a GPU off
    the bus every ~4 s somewhere) nodes fail within seconds, as `status --json` judges them."""
    table = tmp_path / "demo-rates.toml"
    table.write_text("[rates]\ngpu_xid79 = { per_node_day = 2700, repair = \"1h\" }\n"
                     "ib_flap = 0\n")
    url = str(mosquitto.url)
    sim = spawn("sim", "--broker", url, "--cluster", "rates", "--nodes", "8", "--seed", "3",
                "--fault-rates", str(table), log=tmp_path / "sim.log")
    try:
        deadline = time.monotonic() + 40
        failed: list[str] = []
        while time.monotonic() < deadline and len(failed) < 2:
            out = run_cli("status", "--broker", url, "--cluster", "rates", "--json",
                          "--wait", "2")
            if out.returncode == 0:
                failed = [n["id"] for n in json.loads(out.stdout)["nodes"]
                          if n["verdict"] == "failed" and "G1" in n["reasons"]]
        assert len(failed) >= 2, failed
    finally:
        assert stop_process(sim) == 0


def test_a_run_where_no_job_held_a_node_says_why_nothing_is_expected():
    """16 nodes of a scenario written for 1,024: its jobs never start, and the summary printed
    an empty list after 'expected interruptions by cause' (a newcomer read a broken run)."""
    from fleetdeck.agents.sim.offline import OfflineStats, summary_lines

    table = parse_rates({"rates": dict.fromkeys(BUILTIN_CAUSES, 0.001)})
    lines = summary_lines(OfflineStats(nodes=16, duration_s=86_400.0), table, 1.0)
    assert any(line.endswith("none: no job held a node (too few nodes for the scenario's "
                             "jobs?)") for line in lines), lines
