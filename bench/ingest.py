"""Ingest and console under load: N nodes at 1 Hz through a real Mosquitto into the real console.

One paced stream, two subscribers at the same time, each in its own process (bench/_console.py):

  (a) a bare aiomqtt subscriber (the console's transport settings, nothing done per message);
  (b) the console: FleetdeckApp headless (run_test) with its own ConsoleSession and LiveFeed,
      ticking every 0.5 s, painting after each tick; keys pressed while the stream flows.

The publisher (this process) first sends every node's birth and status and waits until the
console knows all N nodes, then sends each node's telemetry once a second for ``--seconds``,
phase-spread, as raw MQTT packets (bench/_mqttload.py) built from evolving samples
(bench/_payloads.py: counters move on every sample). It reports:

* msgs/s each subscriber took (the console's counted when a tick applied them), the ratio,
  delivered % (every sample counted, superseded ones too), CPU % of one core per process
  (/proc: console, bare, broker, publisher) over the stream;
* per-sample lag: sample ts -> applied to the fleet state, and -> the screen painted after it;
* keypress -> screen and view switch -> screen, p50/p99, and the event loop's longest stall;
* console RSS (peak) with N nodes.

Fails (exit 1, a ``BENCH FAILED:`` line) when a subscriber died, received nothing, rejected the
payloads, or the console never learned all N nodes.

    .venv/bin/python bench/ingest.py --quick              # 512 nodes, 8 s: a few seconds' check
    .venv/bin/python bench/ingest.py                      # 2,048 nodes, 20 s (make bench)
    .venv/bin/python bench/ingest.py --nodes 16384 --seconds 20 --rows rows.json
    FLEETDECK_BENCH_STALLS=/tmp/stalls.json .venv/bin/python bench/ingest.py
                     # also: each stall > 40 ms with the loop's stacks sampled in it, GC runs

2,048 nodes is the default because it is the largest stream a shared 2-core machine reliably
carries next to its reference subscriber (at 4,096 the publisher and the bare subscriber are
starved too: see the "waited" column, time runnable but without a CPU).
"""

import argparse
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import (
    BenchFailure,
    Row,
    cpu_s,
    judge,
    main_guard,
    ms,
    require,
    runqueue_s,
    write_rows,
)
from bench._mqttload import RawPublisher, publish_packet, publish_parts, topic_field
from bench._payloads import EvolvingFleet

CLUSTER = "bench"
TARGET_NODES = 16384


class Child:
    """A subscriber process and its lines."""

    def __init__(self, role: str, port: int, args: argparse.Namespace, tmp: Path) -> None:
        self.role = role
        self.err_path = tmp / f"{role}.stderr"
        self._err: IO[bytes] = self.err_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--role", role, "--port", str(port),
             "--nodes", str(args.nodes), "--keys-from", str(args.keys_from),
             "--drain-s", str(args.drain_s)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err, text=True)
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def stderr_tail(self, n: int = 3000) -> str:
        self._err.flush()
        return self.err_path.read_bytes()[-n:].decode(errors="replace")

    def died(self, waiting_for: str) -> BenchFailure:
        rc = self.proc.poll()
        return BenchFailure(f"the {self.role} subscriber exited (rc {rc}) while the benchmark "
                            f"waited for {waiting_for}; its stderr ends:\n{self.stderr_tail()}")

    def expect(self, prefix: str, timeout: float) -> list[str]:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BenchFailure(f"the {self.role} subscriber sent no {prefix} within "
                                   f"{timeout:.0f} s; its stderr ends:\n{self.stderr_tail()}")
            try:
                line = self.lines.get(timeout=min(left, 1.0))
            except queue.Empty:
                continue
            if line is None:
                raise self.died(prefix)
            words = line.split(" ", 1)
            if words[0] == prefix:
                return words[1:]

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise self.died(line.split(maxsplit=1)[0]) from None

    def result(self, timeout: float) -> dict[str, Any]:
        res: dict[str, Any] = json.loads(self.expect("RESULT", timeout)[0])
        rc = self.proc.wait(timeout=30)
        if rc != 0:
            raise self.died("its exit")
        return res

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._err.close()


def wait_born(console: Child, nodes: int, patience: float) -> float:
    """Until the console knows every node; fail when births stop arriving."""
    t0 = time.monotonic()
    last_n, last_change = -1, time.monotonic()
    while True:
        try:
            line = console.lines.get(timeout=1.0)
        except queue.Empty:
            line = ""
        if line is None:
            raise console.died("births")
        if line.startswith("BORN "):
            n = int(line.split()[1])
            if n != last_n:
                last_n, last_change = n, time.monotonic()
            if n >= nodes:
                return time.monotonic() - t0
        if time.monotonic() - last_change > patience:
            raise BenchFailure(f"the console knows {max(last_n, 0)} of {nodes} nodes and no more "
                               f"arrived for {patience:.0f} s (births lost?)")


def send_paced(pub: RawPublisher, packets: list[bytes], rate: float) -> None:
    t0 = time.perf_counter()
    for start in range(0, len(packets), 64):
        delay = t0 + start / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        pub.send(b"".join(packets[start:start + 64]))


def stream(pub: RawPublisher, fleet: EvolvingFleet, t_go: float, seconds: int
           ) -> dict[str, Any]:
    """Every node once a second, phase-spread: message j is due at t_go + j / n."""
    n = fleet.n
    total = n * seconds
    prefix = [topic_field(t) for t in fleet.topics]
    j = 0
    late = 0
    worst = 0.0
    while time.time() < t_go:
        time.sleep(0.001)
    while j < total:
        now = time.time()
        due = min(total, int((now - t_go) * n) + 1)
        if due <= j:
            time.sleep(min(0.002, (j - (now - t_go) * n) / n))
            continue
        end = min(due, j + 300)  # 3 buffers a message, 1,024 buffers a sendmsg at most
        behind = now - (t_go + j / n)
        worst = max(worst, behind)
        if behind > 0.1:
            late += end - j
        ts = int(now * 1000)
        parts: list[bytes] = []
        for m in range(j, end):
            k, i = divmod(m, n)
            parts.extend(publish_parts(prefix[i], fleet.telemetry(i, k, ts)))
        pub.send_parts(parts)
        j = end
    return {"sent": total, "seconds": time.time() - t_go, "late": late,
            "worst_behind_s": worst}


def run(args: argparse.Namespace) -> list[Row]:
    from fleetdeck.broker import MOSQUITTO, ManagedBroker, find_mosquitto

    require(find_mosquitto(), "mosquitto is not installed; this benchmark needs it")
    n = args.nodes
    t0 = time.perf_counter()
    fleet = EvolvingFleet(n, CLUSTER, bd_seq=int(time.time() * 1000), personas=args.personas,
                          wire=args.wire)
    per_sample = sum(len(fleet.telemetry(0, k, 0)) for k in range(30)) / 30
    print(f"payloads: {n} nodes from {len(fleet.personas)} simulated personas, wire v{args.wire}, "
          f"{per_sample:,.0f} B per sample (mean over 30 s), built in "
          f"{time.perf_counter() - t0:.1f} s; {os.cpu_count()} CPUs", flush=True)
    with tempfile.TemporaryDirectory() as tmpdir, ManagedBroker(MOSQUITTO) as broker:
        tmp = Path(tmpdir)
        assert broker.proc is not None
        kids = {role: Child(role, broker.url.port, args, tmp) for role in ("console", "bare")}
        try:
            for kid in kids.values():
                kid.expect("READY", 60)
            console, bare = kids["console"], kids["bare"]
            pub = RawPublisher(broker.url.host, broker.url.port, f"bench-pub-{os.getpid()}")
            now_ms = int(time.time() * 1000)
            packets = []
            for i in range(n):
                packets.append(publish_packet(*fleet.birth(i)))
                packets.append(publish_packet(*fleet.status(i, now_ms)))
            send_paced(pub, packets, args.birth_rate)
            born_s = wait_born(console, n, patience=20)
            console.expect("WARM", 120)
            print(f"births: all {n} nodes known to the console in {born_s:.1f} s", flush=True)
            t_go = time.time() + 1.0
            for kid in kids.values():
                kid.send(f"GO {t_go} {args.seconds}")
            pids = {"console": console.proc.pid, "bare": bare.proc.pid,
                    "broker": broker.proc.pid, "publisher": os.getpid()}
            while time.time() < t_go:
                time.sleep(0.001)
            load = os.getloadavg()[0]
            c0 = {k: cpu_s(p) for k, p in pids.items()}
            w0 = {k: runqueue_s(p) for k, p in pids.items()}
            pubr = stream(pub, fleet, t_go, args.seconds)
            wall = time.time() - t_go
            c1 = {k: cpu_s(p) for k, p in pids.items()}
            w1 = {k: runqueue_s(p) for k, p in pids.items()}
            pub.close()
            cpu = {k: 100 * (c1[k] - c0[k]) / wall for k in pids}
            cpu.update({f"{k}_waited": 100 * (w1[k] - w0[k]) / wall for k in pids}, load=load)
            for kid in kids.values():
                kid.send(f"END {pubr['sent']}")
            b = bare.result(30)
            c = console.result(args.drain_s + 60)
        finally:
            for kid in kids.values():
                kid.close()
    return report(args, fleet, pubr, cpu, b, c)


def report(args: argparse.Namespace, fleet: EvolvingFleet, pubr: dict[str, Any],
           cpu: dict[str, float], b: dict[str, Any], c: dict[str, Any]) -> list[Row]:
    n = fleet.n
    sent = pubr["sent"]
    require(sent > 0, "the publisher sent no telemetry")
    require(b["telemetry"] > 0, f"the bare subscriber received none of {sent} samples")
    require(c["malformed"] == 0, f"the console rejected {c['malformed']} messages "
            f"({c['malformed_reasons']}): the benchmark's payloads are broken")
    require(c["stored"] > 0, f"the console received none of {sent} samples")
    require(c["applied"] > 0, "no sample reached the fleet state (no tick applied any)")
    require(c["nodes"] >= n, f"the console knows {c['nodes']} of {n} nodes")
    require(c["paint_lag"]["n"] > 0, "the screen was never painted after a tick")

    b_rate = (b["telemetry"] - 1) / (b["last"] - b["first"]) if b["last"] > b["first"] else 0.0
    span = c["last_apply"] - c["first_apply"]
    c_rate = (c["applied"] - c["first_batch"]) / span if span > 0 else 0.0
    ratio = c_rate / b_rate if b_rate else float("nan")
    c_deliv = 100 * c["applied"] / sent
    b_deliv = 100 * b["telemetry"] / sent
    on_time = pubr["late"] == 0
    nominal = n

    print(f"\nstream: {n:,} nodes x 1 Hz for {args.seconds} s = {sent:,} samples "
          f"({nominal:,} msg/s nominal); publisher worst {1000 * pubr['worst_behind_s']:.0f} ms "
          f"behind schedule, {pubr['late']:,} samples > 100 ms late")
    print(f"{'':<24}{'received':>10}{'delivered':>11}{'dropped*':>10}{'msg/s':>9}"
          f"{'CPU % core':>12}{'waited %**':>12}")
    print(f"{'(a) bare aiomqtt':<24}{b['telemetry']:>10,}{b_deliv:>10.1f}%{b['discarded']:>10,}"
          f"{b_rate:>9,.0f}{cpu['bare']:>12.0f}{cpu['bare_waited']:>12.0f}")
    print(f"{'(b) fleetdeck console':<24}{c['applied']:>10,}{c_deliv:>10.1f}%"
          f"{c['discarded']:>10,}{c_rate:>9,.0f}{cpu['console']:>12.0f}"
          f"{cpu['console_waited']:>12.0f}")
    print(f"{'ratio (b)/(a)':<24}{'':>41}{ratio:>9.2f}")
    for k in ("broker", "publisher"):
        print(f"{k:<24}{'':>50}{cpu[k]:>12.0f}{cpu[k + '_waited']:>12.0f}")
    print("*  dropped by aiomqtt, its incoming queue full (the console's limit, "
          "live.MAX_QUEUED_INCOMING)\n** of the stream's wall time, runnable but waiting for a "
          f"CPU (/proc/PID/schedstat); load average before the stream {cpu['load']:.2f}")
    print(f"console: {c['ticks']} ticks, tick (apply + view refresh) p50 "
          f"{c['tick_ms']['p50_ms']:.0f} ms, max {c['tick_ms']['max_ms']:.0f} ms; "
          f"{c['paints']} paints; {c['connects']} MQTT connect(s), now {c['conn'].strip()}; "
          f"aiomqtt queue at the end {c['queued_at_end']}; RSS "
          f"{c['rss_end_mib']:.0f} MiB at stream end, peak {c['rss_peak_mib']:.0f} MiB")
    lost = sent - c["stored"] - c["discarded"] - (c["queued_at_end"] or 0)
    if c["applied"] < sent:
        print(f"console did not apply {sent - c['applied']:,} samples: {c['discarded']:,} dropped "
              f"by aiomqtt (queue full), {c['queued_at_end'] or 0:,} still queued when the run "
              f"ended ({args.drain_s:g} s after the stream), {max(0, lost):,} never reached it "
              "(Mosquitto drops QoS 0 for a subscriber more than max_queued_messages = 10,000 "
              "behind)")
    al, pl = c["apply_lag"], c["paint_lag"]
    print(f"lag per sample sent (n={sent:,}; {pl['never']:,} never on screen by the end, counted "
          f"as never), ms: ts -> applied p50 {ms(al['p50_ms'] / 1000)}, p99 "
          f"{ms(al['p99_ms'] / 1000)}; ts -> on screen p50 {ms(pl['p50_ms'] / 1000)}, p99 "
          f"{ms(pl['p99_ms'] / 1000)}, max {ms(pl['max_ms'] / 1000)}")
    kn, ks = c["keys_nav"], c["keys_switch"]
    print(f"keys while ingesting: cursor keys n={kn['n']} p50 {kn['p50_ms']:,.0f} ms p99 "
          f"{kn['p99_ms']:,.0f} ms; view switches n={ks['n']} p50 {ks['p50_ms']:,.0f} ms p99 "
          f"{ks['p99_ms']:,.0f} ms; {c['keys_timed_out']} key(s) not on screen within 10 s; "
          f"first visits (untimed warm-up) {c['first_visit_ms']} ms")
    if args.verbose:
        print("keys (ms):", " ".join(f"{k}:{v}" for k, v in c["per_key"]))
    st, sk = c["stall_stream"], c["stall_keys"]
    print(f"event-loop stalls (10 ms probe oversleep): whole stream p99 {st['p99_ms']:,.0f} ms, "
          f"max {st['max_ms']:,.0f} ms; during keys max {sk['max_ms']:,.0f} ms")
    sc = c.get("stall_stream_cpu")
    if sc:
        print("  the same beats in the loop thread's CPU time (what the console held the loop "
              f"for, without waiting for a core): p99 {sc['p99_ms']:,.0f} ms, "
              f"max {sc['max_ms']:,.0f} ms")
    print()

    src = "bench/ingest.py"
    tn = TARGET_NODES
    ingest_ok = cpu["console"] <= 70 and c["applied"] >= sent and on_time
    return [
        Row("16,384 nodes at 1 Hz into fleet state on one core: <= 70 % of it, 100 % delivered",
            f"{cpu['console']:.0f} % of a core (+{cpu['console_waited']:.0f} % runnable, no CPU "
            f"free), {c_deliv:.1f} % delivered",
            "% core / % delivered", judge(ingest_ok, n, tn), n, cpu["console"], src),
        Row("ingest >= 0.8 x a bare subscriber, same stream, same time",
            f"{ratio:.2f} ({c_rate:,.0f} vs {b_rate:,.0f} msg/s; bare got {b_deliv:.0f} %)",
            "ratio", judge(ratio >= 0.8 and on_time, n, tn), n, ratio, src),
        Row("sample -> visible on screen p99 < 1 s at 16,384 nodes",
            f"p99 {ms(pl['p99_ms'] / 1000)} (p50 {ms(pl['p50_ms'] / 1000)}; applied p99 "
            f"{ms(al['p99_ms'] / 1000)}; {100 * pl['never'] / sent:.0f} % never shown)", "ms",
            judge(pl["p99_ms"] < 1000 and on_time, n, tn),
            n, pl["p99_ms"], src),
        Row("keypress -> screen p99 < 100 ms while ingesting 16,384 nodes",
            f"p99 {kn['p99_ms']:,.0f} (p50 {kn['p50_ms']:,.0f}; {kn['n']} keys)", "ms",
            judge(kn["n"] > 0 and kn["p99_ms"] < 100, n, tn), n, kn["p99_ms"], src),
        Row("no event-loop stall > 50 ms while ingesting 16,384 nodes",
            f"longest {st['max_ms']:,.0f} (p99 {st['p99_ms']:,.0f})", "ms",
            judge(st["n"] > 0 and st["max_ms"] <= 50, n, tn), n, st["max_ms"], src),
        Row("view switch p99 < 100 ms at 16,384 nodes (while ingesting)",
            f"p99 {ks['p99_ms']:,.0f} (p50 {ks['p50_ms']:,.0f}; {ks['n']} switches)", "ms",
            judge(ks["n"] > 0 and ks["p99_ms"] < 100, n, tn), n, ks["p99_ms"], src),
        Row("console RSS <= 1 GiB at 16,384 nodes",
            f"{c['rss_peak_mib']:,.0f} peak ({c['rss_end_mib']:,.0f} at stream end)", "MiB",
            judge(c["rss_peak_mib"] <= 1024, n, tn), n, c["rss_peak_mib"], src),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=2048)
    ap.add_argument("--seconds", type=int, default=20, help="length of the 1 Hz stream")
    ap.add_argument("--quick", action="store_true", help="512 nodes for 8 s: a quick check")
    ap.add_argument("--personas", type=int, default=1024,
                    help="distinct simulated nodes the payloads are made from")
    ap.add_argument("--wire", type=int, choices=(1, 2), default=2,
                    help="telemetry wire format (agents send 2: keyframes and deltas)")
    ap.add_argument("--birth-rate", type=float, default=4000.0,
                    help="births and statuses per second before the stream")
    ap.add_argument("--keys-from", type=float, default=0.3,
                    help="share of the stream after which keys are pressed")
    ap.add_argument("--drain-s", type=float, default=15.0,
                    help="after the stream, how long the console may catch up")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every key's latency")
    ap.add_argument("--rows", help="write the result rows (JSON) here")
    ap.add_argument("--role", choices=["bare", "console"], help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.role:
        from bench._console import child_main

        child_main(args.role, args.port, CLUSTER, args.nodes, args.keys_from, args.drain_s)
        return 0
    if args.quick:
        args.nodes, args.seconds = 512, 8
    rows = run(args)
    write_rows(args.rows, rows)
    return 0


if __name__ == "__main__":
    main_guard(main)
