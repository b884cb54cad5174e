"""The benchmarks fail loudly instead of printing figures about nothing (bench/, `make bench`).

Fast: no benchmark runs here at size. These pin the checks that keep a dead subject from
reading as a result, the evolving payloads the ingest benchmark publishes, and the framing-only
counter that checks what went through a real broker.
"""

import json
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench import ingest as ingest_bench
from bench import sim_capacity
from bench._common import FAILED, BenchFailure, judge, main_guard
from bench._mqttload import RawCounter, RawPublisher, publish_packet
from bench._payloads import EvolvingFleet
from fleetdeck.console.ingest import Ingest
from fleetdeck.protocol import codec, wire2
from fleetdeck.protocol.messages import Birth
from tests.conftest import REPO


def test_a_benchmark_failure_is_one_loud_line_and_exit_1(capsys):
    def measured_nothing() -> int:
        raise BenchFailure("the console received none of 4096 samples")

    with pytest.raises(SystemExit) as exc:
        main_guard(measured_nothing)
    assert exc.value.code == 1
    assert capsys.readouterr().err == f"{FAILED} the console received none of 4096 samples\n"


def test_samples_that_never_arrived_count_as_infinitely_late():
    from bench._console import _ms_stats

    got = _ms_stats([0.1] * 98, never=2)  # 2 % of the samples never reached the screen
    assert got["p50_ms"] == pytest.approx(100)
    assert got["p99_ms"] == float("inf")
    assert _ms_stats([0.1] * 99 + [0.2])["p99_ms"] == pytest.approx(100)


def test_smaller_fleets_never_meet_a_target_by_extrapolation():
    assert judge(True, 4096, 16384) is None  # passing small says nothing about the target
    assert judge(False, 4096, 16384) is False  # failing small already fails it
    assert judge(True, 16384, 16384) is True
    assert judge(False, 16384, 16384) is False


def _bare(**kw):
    return {"telemetry": 4000, "other": 0, "first": 1.0, "last": 11.0, "discarded": 0} | kw


def _console(**kw):
    stats = {"n": 10, "never": 0, "p50_ms": 1.0, "p99_ms": 2.0, "max_ms": 3.0}
    return {"stored": 4000, "applied": 4000, "sent": 4000, "malformed": 0,
            "malformed_reasons": {}, "nodes": 4, "first_apply": 1.0, "last_apply": 11.0,
            "first_batch": 10, "apply_lag": stats, "paint_lag": stats} | kw


@pytest.mark.parametrize(("bare", "console", "why"), [
    (_bare(telemetry=0), _console(), "bare subscriber received none"),
    (_bare(), _console(stored=0, applied=0), "console received none"),
    (_bare(), _console(applied=0), "no sample reached the fleet state"),
    (_bare(), _console(malformed=7, malformed_reasons={"invalid": 7}), "payloads are broken"),
    (_bare(), _console(nodes=2), "knows 2 of 4 nodes"),
    (_bare(), _console(paint_lag={"n": 0, "never": 4000}), "never painted"),
])
def test_ingest_refuses_to_report_when_a_subscriber_got_nothing(bare, console, why):
    args = SimpleNamespace(seconds=10, verbose=False)
    with pytest.raises(BenchFailure, match=why):
        ingest_bench.report(args, SimpleNamespace(n=4), {"sent": 4000, "late": 0,
                                                         "worst_behind_s": 0.0},
                            {}, bare, console)


def _sim_row(**kw):
    return {"nodes": 64, "died_count": 0, "died": [], "error_count": 0, "errors": [],
            "sampled": 640, "delivered": 640} | kw


@pytest.mark.parametrize(("row", "why"), [
    (_sim_row(died_count=64, died=["gpu0001: TypeError('takes 2 positional arguments')"]),
     "64 agent task\\(s\\) died"),
    (_sim_row(error_count=1, errors=["asyncio: Task exception was never retrieved"]),
     "logged 1 error"),
    (_sim_row(sampled=0), "no agent took a single sample"),
    (_sim_row(delivered=0), "broker passed on no telemetry"),
])
def test_sim_capacity_never_reads_a_dead_fleet_as_zero_late(row, why):
    with pytest.raises(BenchFailure, match=why):
        sim_capacity.check(row)
    sim_capacity.check(_sim_row())  # a live fleet passes


def test_the_bench_agent_matches_the_simulators_telemetry_loop():
    """The benchmark overrides SimAgent._telemetry_loop; when the agent's signature changes
    this fails here, not as thousands of dead agents."""
    from fleetdeck.agents.fleet import SimAgent

    async def ours(self, client, stop):  # the shape bench/sim_capacity.py overrides
        pass

    sim_capacity._same_signature(ours, SimAgent._telemetry_loop, "_telemetry_loop")

    async def old(self, client):
        pass

    with pytest.raises(BenchFailure, match="no longer matches"):
        sim_capacity._same_signature(old, SimAgent._telemetry_loop, "_telemetry_loop")


def test_sim_capacity_times_the_column_reads_the_simulated_agents_make():
    """The simulated agent reads its node's columns (NodeAgent.columns): the benchmark's timed
    source must note those reads, or a window's every sample reads as never taken."""
    from fleetdeck.agents.agent import NodeAgent
    from fleetdeck.agents.sim.world import SimWorld, WorldOptions
    from fleetdeck.brokerurl import BrokerURL

    world = SimWorld(WorldOptions(nodes=1, seed=1))
    node = world.nodes[0]
    agent = NodeAgent(cluster="b", node_id=node.node_id, source=node, url=BrokerURL("h", 1))
    timed = sim_capacity.Timed(node, 1.0)
    agent.source = timed  # as the benchmark swaps it in, after the agent is made
    timed.start = time.monotonic() - 0.25
    timed.window = (timed.start - 10, timed.start + 10)
    world.step()
    assert wire2.decode(agent.telemetry_payload()).keyframe
    assert len(timed.lateness) == 1 and 0.25 <= timed.lateness[0] < 5


@pytest.mark.parametrize("wire", [1, 2])
def test_published_samples_are_valid_and_their_counters_move(wire: int) -> None:
    fleet = EvolvingFleet(6, "bench", bd_seq=1_700_000_000_000, personas=3, wire=wire)
    birth = codec.decode(Birth, fleet.birth(5)[1])
    assert birth.node == "gpu00006"
    ing = Ingest("bench")
    ing.handle(*fleet.birth(5), 1_700_000_000.0)
    samples = []
    for k in range(34):  # past the v2 keyframe period: a second keyframe, then deltas
        payload = fleet.telemetry(5, k, 1_700_000_000_000 + 1000 * k)
        ing.handle(fleet.topics[5], payload, 1_700_000_000.0 + k)
        tel = ing.take_batch().telemetry["gpu00006"][1]
        if wire == 2:
            assert wire2.decode(payload).keyframe == (k % 30 == 0), k
        samples.append(tel)
    assert ing.malformed.total == 0 and ing.keyframe_missing == 0
    assert [s.seq for s in samples] == list(range(1, 35))
    assert {s.node for s in samples} == {"gpu00006"}
    rx = [s.ib_ports[0].rcv_bytes_total for s in samples[:3]]
    energy = [s.gpus[0].energy_j for s in samples[:3]]
    assert rx[0] < rx[1] < rx[2], rx
    assert energy[0] < energy[1] < energy[2], energy
    # node 2 shares node 5's persona (3 personas) but is its own node with its own name
    assert b'"node":"gpu00003"' in fleet.telemetry(2, 0, 1)


def test_the_framing_counter_sees_what_went_through_the_broker(mosquitto):
    url = mosquitto.url
    counter = RawCounter(url.host, url.port, "count-test", "fleetdeck/v1/bench/node/+/telemetry")
    pub = RawPublisher(url.host, url.port, "pub-test")
    t0 = time.time()
    big = b"x" * 20_000  # spans reads: the counter must reassemble frames
    pub.send(b"".join(publish_packet(f"fleetdeck/v1/bench/node/gpu{i:05d}/telemetry",
                                     big if i % 2 else b"{}") for i in range(20)))
    pub.send(publish_packet("fleetdeck/v1/bench/node/gpu00001/birth", b"{}"))  # not counted
    deadline = time.monotonic() + 5
    while len(counter.times) < 20 and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.1)
    pub.close()
    counter.close()
    assert counter.between(t0, time.time() + 1) == 20


def test_make_bench_turns_a_failed_benchmark_into_not_met_rows_and_exit_1(tmp_path):
    script = tmp_path / "dead.py"
    script.write_text("import sys\nprint('BENCH FAILED: the simulator sent nothing', "
                      "file=sys.stderr)\nsys.exit(1)\n")
    out = tmp_path / "rows.json"
    probe = (
        "import sys; sys.argv = ['run_all', '--quick', '--json', sys.argv[2]]\n"
        "from bench import run_all\n"
        f"run_all.PLAN = [({str(script)!r}, [], [], ['simulator target'])]\n"
        "sys.exit(run_all.main())\n")
    proc = subprocess.run([sys.executable, "-c", probe, "x", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "benchmark failed: the simulator sent nothing" in proc.stdout
    assert f"{FAILED} {script}: the simulator sent nothing" in proc.stderr
    rows = json.loads(out.read_text())
    assert [(r["target"], r["met"], r["status"]) for r in rows] == [
        ("simulator target", False, "NOT MET")]


def test_the_digest_benchmark_publishes_valid_digests():
    from bench.collectors import digest_templates
    from fleetdeck.protocol.messages import Digest

    ok, failed = digest_templates(every_s=10.0)
    got = [codec.decode(Digest, t % (b"gpu00042", 1767225600123)) for t in (ok, failed)]
    assert [(d.node, d.ts, d.verdict, d.every_s) for d in got] == [
        ("gpu00042", 1767225600123, "ok", 10.0), ("gpu00042", 1767225600123, "failed", 10.0)]
    assert [f.rule for f in got[1].findings] == ["G2"] and len(got[0].gpus) == 8


def test_feed_lag_counts_each_sample_from_its_arrival_to_the_paint_that_showed_it():
    """console_scale's sample -> screen under its feed: a sample is shown by the first paint of
    a refresh after which the state had applied it; what was never applied counts as never
    shown, not as fast."""
    from bench.console_scale import TICK_S, FeedLag

    state = SimpleNamespace(applied=100)
    lag = FeedLag(state)
    lag.measuring = True
    lag.handed(4)
    handed = lag.marks[0][2]
    state.applied = 102  # half the batch applied, then refreshed and painted
    lag.refreshed("r1")
    lag.painted(SimpleNamespace(revision="r1", perf=handed + 0.2))
    assert len(lag.lags) == 2
    arrived = [handed - TICK_S + TICK_S * (i + 0.5) / 4 for i in range(4)]
    assert lag.lags == pytest.approx([handed + 0.2 - a for a in arrived[:2]])
    lag.painted(SimpleNamespace(revision="r1", perf=handed + 0.3))  # painted again: no news
    assert len(lag.lags) == 2
    lag.handed(4)
    state.applied = 107  # the first batch and three of the second
    lag.refreshed("r2")
    lag.painted(SimpleNamespace(revision="r2", perf=handed + 0.9))
    assert len(lag.lags) == 7 and lag.never_shown() == 1
    second = lag.marks[1][2] - TICK_S + TICK_S * 0.5 / 4  # the second batch's first sample
    assert lag.lags[2:4] == pytest.approx([handed + 0.9 - a for a in arrived[2:]])
    assert max(lag.lags) == pytest.approx(handed + 0.9 - second)


def test_the_instruction_count_benchmark_fails_loudly_without_valgrind(tmp_path):
    # Only the interpreter on PATH: no valgrind to count with.
    (tmp_path / "python").symlink_to(sys.executable)
    out = subprocess.run([sys.executable, str(REPO / "bench" / "hot_path_ir.py")],
                         capture_output=True, text=True, env={"PATH": str(tmp_path)},
                         timeout=60, check=False)
    assert out.returncode == 1
    assert out.stderr.strip() == f"{FAILED} valgrind is not installed"
    assert out.stdout == ""


def test_the_instruction_count_subject_applies_every_sample():
    from bench.hot_path_ir import feed

    feed(16, 3, 8)  # raises BenchFailure if a round's samples were not all applied


def test_the_seek_benchmark_fails_loudly_on_a_recording_of_nothing(tmp_path):
    """bench/replay_seek.py on a recording that holds no message: the seeks 'land' at once,
    and no figure may be printed for them."""
    from fleetdeck.console.recording import RecordingWriter

    path = tmp_path / "empty.jsonl.gz"
    RecordingWriter(path, "fx", source="test", started=1_800_000_000.0).close()
    out = subprocess.run([sys.executable, str(REPO / "bench" / "replay_seek.py"), str(path),
                          "--reps", "1", "--moves", "]"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1].startswith(
        f"{FAILED} the replay shows no node: "), out.stderr
    assert out.stdout == ""


def test_sim_sample_cost_measures_samples_or_says_it_measured_none():
    run = [sys.executable, str(REPO / "bench" / "sim_sample_cost.py"), "--nodes", "4"]
    ok = subprocess.run([*run, "--ticks", "1"], capture_output=True, text=True, timeout=120,
                        check=False)
    assert ok.returncode == 0 and "CPU µs a sample best" in ok.stdout, ok.stderr
    none = subprocess.run([*run, "--ticks", "0"], capture_output=True, text=True, timeout=120,
                          check=False)
    assert none.returncode == 1 and FAILED in none.stdout + none.stderr
    assert "CPU µs" not in none.stdout


def test_the_stall_file_says_which_callback_held_the_loop_and_what_ran_inside_it(
        tmp_path, monkeypatch):
    """A stall is often several callbacks in one step of the loop, and a GC run inside one of
    them: the stall file keeps every callback of >= 2 ms of CPU with the timed calls and GC
    runs inside it, and bench/stall_report.py names the longest (docs/performance.md, "What
    the loop's longest steps are made of")."""
    import asyncio
    import gc

    from bench import stall_report
    from bench._console import LOOP, LoopProbe

    out = tmp_path / "stalls.json"
    monkeypatch.setenv("FLEETDECK_BENCH_STALLS", str(out))

    class Work:
        def inner(self) -> None:
            t_end = time.thread_time() + 0.05
            while time.thread_time() < t_end:
                pass
            gc.collect(0)

    def held() -> None:
        Work().inner()

    async def run() -> None:
        probe = LoopProbe()
        probe.time_calls(Work, "inner")
        probe.start()
        await asyncio.sleep(0.03)
        asyncio.get_running_loop().call_soon(held)
        await asyncio.sleep(0.1)
        probe.stop()

    asyncio.run(run())
    data = json.loads(out.read_text())
    names = {name for _t, name, _cpu, _wall in data["calls"]}
    assert LOOP + "test_the_stall_file_says_which_callback_held_the_loop_and_what_ran_" \
        "inside_it.<locals>.held" in names, names
    assert "Work.inner" in names, names
    assert any(g == 0 for _t, g, _ms in data["gc_runs"]), data["gc_runs"]
    monkeypatch.setattr(sys, "argv", ["stall_report", str(out)])
    import contextlib
    import io

    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        assert stall_report.main() == 0
    text = said.getvalue()
    longest = text.split("longest event-loop callbacks")[1].splitlines()[1]
    assert ".held:" in longest and "Work.inner" in longest and "gc0" in longest, text


def test_the_replay_floor_decodes_every_message_and_refuses_a_damaged_line(
        tmp_path: Path) -> None:
    """bench/replay_ceiling.py's floor reads, takes out and decodes every message of the
    recording (a stage that skipped some would read as a lower floor), and a line whose
    payload cannot be taken out stops it instead of being timed as read."""
    from bench.replay import build
    from bench.replay_ceiling import read

    rec = tmp_path / "rec.jsonl"
    _write_s, written = build(rec, 4, 2)
    assert read(rec, 0) == read(rec, 2) == written
    lines = rec.read_bytes().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if b"/telemetry" in line)
    lines[at] = lines[at].replace(b'"p":"', b'"p":"\\q', 1)  # not a JSON escape
    rec.write_bytes(b"".join(lines))
    with pytest.raises(BenchFailure, match="damaged line"):
        read(rec, 2)


def test_the_replay_floor_refuses_an_empty_recording_and_a_kind_it_does_not_decode(
        tmp_path: Path) -> None:
    """A floor of no message is 0 CPU s (an infinite 'x real' or a division by zero in the
    figures), and a message counted but not decoded lowers the floor it is timed in: both stop
    bench/replay_ceiling.py instead of being printed."""
    from bench.replay import build
    from bench.replay_ceiling import read

    rec = tmp_path / "rec.jsonl"
    build(rec, 2, 2)
    head, *rest = rec.read_bytes().splitlines(keepends=True)
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(head if b'"p":' not in head else b"")
    with pytest.raises(BenchFailure, match="no message"):
        read(empty, 2)
    at = next(i for i, line in enumerate(rest) if b"/status/" in line or b"/status\"" in line)
    rest[at] = rest[at].replace(b"/status", b"/event", 1)
    rec.write_bytes(b"".join([head, *rest]))
    with pytest.raises(BenchFailure, match="does not decode"):
        read(rec, 2)
