"""Sharded collectors and the digest console, through a real Mosquitto.

Part 1, collectors on one stream: for each C in ``--collectors`` (default 1,2,4) a fresh
Mosquitto gets N nodes' retained births and statuses, C real ``fleetdeck collect --shard k/C``
processes split them (rendezvous hashing), then every node's telemetry once a second for
``--seconds`` (bench/_mqttload.py raw publisher, evolving samples from bench/_payloads.py).
Per C: messages/s each collector received and applied (its own progress lines), CPU % of one
core per collector, of the broker and of the publisher (/proc), and the broker's CPU per
message (what projects where one Mosquitto stops, docs/performance.md).

Part 2, the digest console: a fresh Mosquitto gets ``--digest-nodes`` (default 65,536) retained
digests from a raw publisher (as a sharded collector would leave them), then the real console
(FleetdeckApp on digests, headless, ticking on its own timer; bench/_console.py's BenchApp)
starts, learns every node, and the publisher refreshes every node's digest every 5 s (1 % of
them changing verdict each round) for ``--digest-seconds`` while keys are pressed. Reports:
time to know every node, digests/s applied vs sent, console CPU %, tick and keypress times, the
event loop's longest stall, RSS.

Fails loudly (``BENCH FAILED:``) when a collector or the console received nothing, or the
collectors never split the fleet.

    .venv/bin/python bench/collectors.py --quick     # 512 nodes / 8,192 digests, 6 s each
    .venv/bin/python bench/collectors.py             # 2,048 nodes; 65,536 digests; 10 s each
"""

import argparse
import asyncio
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import BenchFailure, cpu_s, main_guard, require, rss_mib
from bench._mqttload import RawPublisher, _str, _varint, publish_parts, topic_field
from bench._payloads import EvolvingFleet, node_name
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import Digest, DigestFinding, DigestGpu, DigestPort
from fleetdeck.protocol.topics import Kind, topic_for

CLUSTER = "bench"
PROGRESS = re.compile(r"collect \S+: (\S+) \(live: ([^)]*)\), (\d+) digests, (\d+) nodes, "
                      r"(\d+) received, (\d+) messages")


def retained(topic: str, payload: bytes) -> bytes:
    body = _str(topic.encode()) + payload
    return b"\x31" + _varint(len(body)) + body  # PUBLISH, QoS 0, retain


class Collector:
    """One ``fleetdeck collect --shard k/C`` process and its progress lines."""

    def __init__(self, k: int, c: int, port: int, tmp: Path) -> None:
        self.name = f"shard-{k}"
        self.err: IO[bytes] = (tmp / f"collect{k}.stderr").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fleetdeck.cli", "collect", "--broker",
             f"mqtt://127.0.0.1:{port}", "--cluster", CLUSTER, "--shard", f"{k}/{c}", "--db",
             str(tmp / f"c{k}.db"), "--status-every", "0.5"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.last: tuple[int, int, int, int, str] | None = None
        """(digests, nodes, received, applied, live) from its newest progress line."""
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self.err.write(raw)
            m = PROGRESS.search(raw.decode(errors="replace"))
            if m is not None:
                self.last = (int(m[3]), int(m[4]), int(m[5]), int(m[6]), m[2])

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait()


def collectors_run(args: argparse.Namespace, c: int, fleet: EvolvingFleet) -> dict[str, Any]:
    from bench.ingest import stream
    from fleetdeck.broker import MOSQUITTO, ManagedBroker

    n = fleet.n
    with tempfile.TemporaryDirectory(prefix="fd-bench-shard-") as tmp_s, \
            ManagedBroker(MOSQUITTO) as broker:
        tmp = Path(tmp_s)
        assert broker.proc is not None
        pub = RawPublisher("127.0.0.1", broker.port, "bench-pub")
        now_ms = int(time.time() * 1000)
        packets = []
        for i in range(n):
            packets.append(retained(*fleet.birth(i)))
            packets.append(retained(*fleet.status(i, now_ms)))
        for start in range(0, len(packets), 256):
            pub.send(b"".join(packets[start:start + 256]))
        cols = [Collector(k, c, broker.port, tmp) for k in range(1, c + 1)]
        try:
            deadline = time.monotonic() + 90
            while True:
                lasts = [col.last for col in cols]
                if all(last is not None and len(last[4].split(",")) == c for last in lasts) \
                        and sum(last[1] for last in lasts if last) == n:
                    break
                for col in cols:
                    if col.proc.poll() is not None:
                        raise BenchFailure(f"{col.name} exited (rc {col.proc.returncode})")
                if time.monotonic() > deadline:
                    raise BenchFailure(f"{c} collectors never split {n} nodes: {lasts}")
                time.sleep(0.2)
            owned = {col.name: col.last[1] for col in cols if col.last}
            time.sleep(1.0)
            before = {col.name: col.last for col in cols}
            cpu0 = {col.name: cpu_s(col.proc.pid) for col in cols}
            b0, p0, t0 = cpu_s(broker.proc.pid), cpu_s(), time.time()
            sent = stream(pub, fleet, time.time() + 0.2, args.seconds)
            b1, p1, t1 = cpu_s(broker.proc.pid), cpu_s(), time.time()
            cpu1 = {col.name: cpu_s(col.proc.pid) for col in cols}
            time.sleep(2.0)  # the last samples reach the collectors' progress lines
            after = {col.name: col.last for col in cols}
            wall = t1 - t0
            per: dict[str, dict[str, float]] = {}
            for col in cols:
                a, b = after[col.name], before[col.name]
                assert a is not None and b is not None
                require(a[2] > b[2], f"{col.name} received nothing during the stream")
                per[col.name] = {
                    "nodes": owned[col.name],
                    "received_per_s": (a[2] - b[2]) / sent["seconds"],
                    "applied_per_s": (a[3] - b[3]) / sent["seconds"],
                    "digests_per_s": (a[0] - b[0]) / sent["seconds"],
                    "cpu_pct": 100 * (cpu1[col.name] - cpu0[col.name]) / wall,
                }
            pub.close()
        finally:
            codes = {col.name: col.stop() for col in cols}
        require(all(rc == 0 for rc in codes.values()), f"collectors exited {codes}")
        total_rx = sum(p["received_per_s"] for p in per.values())
        return {"collectors": c, "nodes": n, "sent_per_s": sent["sent"] / sent["seconds"],
                "late": sent["late"], "per": per, "received_per_s": total_rx,
                "broker_cpu_pct": 100 * (b1 - b0) / wall,
                "broker_us_per_msg": 1e6 * (b1 - b0) / max(1, sent["sent"]),
                "publisher_cpu_pct": 100 * (p1 - p0) / wall}


def takeover_run(args: argparse.Namespace, fleet: EvolvingFleet, c: int = 3) -> dict[str, Any]:
    """C collectors under the stream; SIGKILL one; seconds until every one of its nodes has a
    digest from a survivor (a subscriber on ``digest/+`` in this process notes who sent what)."""
    import aiomqtt

    from bench.ingest import stream
    from fleetdeck.broker import MOSQUITTO, ManagedBroker

    n = fleet.n
    with tempfile.TemporaryDirectory(prefix="fd-bench-takeover-") as tmp_s, \
            ManagedBroker(MOSQUITTO) as broker:
        tmp = Path(tmp_s)
        pub = RawPublisher("127.0.0.1", broker.port, "bench-pub")
        now_ms = int(time.time() * 1000)
        for start in range(0, n, 128):
            pub.send(b"".join(retained(*fleet.birth(i)) + retained(*fleet.status(i, now_ms))
                              for i in range(start, min(n, start + 128))))
        by: dict[str, tuple[str, float]] = {}
        ready = threading.Event()
        done = threading.Event()

        def watch() -> None:
            async def run() -> None:
                async with aiomqtt.Client("127.0.0.1", broker.port) as cl:
                    await cl.subscribe(f"fleetdeck/v1/{CLUSTER}/digest/+")
                    ready.set()
                    async for m in cl.messages:
                        d = json.loads(m.payload)
                        by[d["node"]] = (d["by"], time.monotonic())
                        if done.is_set():
                            return
            asyncio.run(run())

        threading.Thread(target=watch, daemon=True).start()
        ready.wait(10)
        cols = [Collector(k, c, broker.port, tmp) for k in range(1, c + 1)]
        t_go = time.time() + 1.0
        streamer = threading.Thread(
            target=stream, args=(pub, fleet, t_go, args.takeover_seconds), daemon=True)
        streamer.start()
        try:
            deadline = time.monotonic() + 60
            while len({b for b, _t in by.values()}) < c or len(by) < n:
                require(time.monotonic() < deadline, f"{c} collectors never digested {n} nodes")
                time.sleep(0.2)
            time.sleep(2.0)
            victim = cols[0]
            its = [node for node, (b, _t) in by.items() if b == victim.name]
            t_kill = time.monotonic()
            victim.proc.kill()
            victim.proc.wait(10)
            while not all(by[node][0] != victim.name for node in its):
                require(time.monotonic() < t_kill + 60,
                        f"the nodes of {victim.name} were not taken over within 60 s")
                time.sleep(0.05)
            taken_s = max(by[node][1] for node in its) - t_kill
        finally:
            done.set()
            streamer.join(args.takeover_seconds + 30)
            for col in cols:
                col.stop()
            pub.close()
        return {"collectors": c, "nodes": n, "victim_nodes": len(its), "takeover_s": taken_s}


# --- the digest console --------------------------------------------------------------------------


def digest_templates(every_s: float = 5.0) -> tuple[bytes, bytes]:
    """An ok and a failed digest of an 8-GPU, 8-port node, with ``%s`` (node) and ``%d`` (ts)."""
    gpus = [DigestGpu(index=i, util_pct=95.0 + i / 10, temp_c=55.0 + i / 10, power_w=500.0 + i)
            for i in range(8)]
    ports = [DigestPort(dev=f"mlx5_ib{i}", up=True) for i in range(8)]
    out = []
    for verdict, findings in (("ok", []), ("failed", [DigestFinding(
            rule="G2", severity="drain", component="gpu3", text="XID 79 (fell off the bus)")])):
        d = Digest(node="NODE", by="shard-1", ts=1, verdict=verdict, findings=findings,
                   online=True, job="4101", ranks_on_node=8, gpus_expected=8, gpus=gpus,
                   ports=ports, leaf="leaf01", rack="rack001", last_seen_s=0.5, every_s=every_s,
                   power_limit_w=700.0)
        raw = codec.encode(d).replace(b"%", b"%%")
        out.append(raw.replace(b'"node":"NODE"', b'"node":"%s"', 1)
                   .replace(b'"ts":1,', b'"ts":%d,', 1))
    return out[0], out[1]


class Child:
    def __init__(self, port: int, args: argparse.Namespace, tmp: Path) -> None:
        self.err_path = tmp / "console.stderr"
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--role", "console", "--port", str(port),
             "--digest-nodes", str(args.digest_nodes)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err_path.open("wb"),
            text=True)
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def expect(self, prefix: str, timeout: float) -> list[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=1.0)
            except queue.Empty:
                continue
            if line is None:
                tail = self.err_path.read_bytes()[-3000:].decode(errors="replace")
                raise BenchFailure(f"the digest console exited waiting for {prefix}:\n{tail}")
            words = line.split(" ", 1)
            if words[0] == prefix:
                return words[1:]
        raise BenchFailure(f"the digest console sent no {prefix} within {timeout:.0f} s")

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()


class DigestStream:
    """Every node's digest every ``every_s`` (``--digest-every``), phase-spread, from the
    moment the console starts (as live collectors do: a console that starts late learns the
    nodes the broker's queue limit kept from its retained burst from these)."""

    def __init__(self, port: int, n: int, every_s: float) -> None:
        self.n = n
        self.every_s = every_s
        self.ok, self.failed = digest_templates(every_s)
        self.names = [node_name(i).encode() for i in range(n)]
        self.topics = [topic_field(topic_for(CLUSTER, Kind.DIGEST, node_name(i)))
                       for i in range(n)]
        self.pub = RawPublisher("127.0.0.1", port, "bench-digests")
        self.sent = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def retained_burst(self) -> None:
        ts = int(time.time() * 1000)
        for start in range(0, self.n, 512):
            self.pub.send(b"".join(
                retained(topic_for(CLUSTER, Kind.DIGEST, node_name(i)),
                         self.ok % (self.names[i], ts))
                for i in range(start, min(self.n, start + 512))))

    def _run(self) -> None:
        rate = self.n / self.every_s
        t0 = time.time()
        j = 0
        while not self.stop.is_set():
            due = int((time.time() - t0) * rate) + 1
            if due <= j:
                time.sleep(0.002)
                continue
            end = min(due, j + 300)
            now_ms = int(time.time() * 1000)
            parts: list[bytes] = []
            for m in range(j, end):
                rnd, i = divmod(m, self.n)
                # 1 % of the nodes change verdict each round: what "on change" sends.
                tmpl = self.failed if (i + rnd) % 100 == 0 else self.ok
                parts.extend(publish_parts(self.topics[i], tmpl % (self.names[i], now_ms)))
            self.pub.send_parts(parts)
            j = end
            self.sent = j

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.pub.close()


def digest_run(args: argparse.Namespace) -> dict[str, Any]:
    from fleetdeck.broker import MOSQUITTO, ManagedBroker

    n = args.digest_nodes
    with tempfile.TemporaryDirectory(prefix="fd-bench-digest-") as tmp_s, \
            ManagedBroker(MOSQUITTO) as broker:
        tmp = Path(tmp_s)
        assert broker.proc is not None
        feed = DigestStream(broker.port, n, args.digest_every)
        feed.retained_burst()
        feed.thread.start()
        child = Child(broker.port, args, tmp)
        try:
            child.expect("READY", 60)
            t_ready = time.monotonic()
            child.expect("KNOWN", 120)
            known_s = time.monotonic() - t_ready
            child.expect("WARM", 60)
            time.sleep(args.digest_every)  # a whole refresh round first: the steady state
            seconds = args.digest_seconds
            t_go = time.time() + 0.5
            child.send(f"GO {t_go} {seconds}")
            while time.time() < t_go:
                time.sleep(0.001)
            c0, b0, sent0 = cpu_s(child.proc.pid), cpu_s(broker.proc.pid), feed.sent
            time.sleep(seconds)
            c1, b1, sent1 = cpu_s(child.proc.pid), cpu_s(broker.proc.pid), feed.sent
            wall = time.time() - t_go
            child.send(f"END {sent1 - sent0}")
            result = json.loads(child.expect("RESULT", 60)[0])
        finally:
            feed.close()
            if child.proc.poll() is None:
                child.proc.terminate()
            child.proc.wait(15)
        require(result["applied"] > 0, "the digest console applied no digest during the stream")
        total = sent1 - sent0
        return {"nodes": n, "every_s": args.digest_every, "known_s": known_s, "sent": total,
                "sent_per_s": total / wall,
                "console_cpu_pct": 100 * (c1 - c0) / wall,
                "broker_cpu_pct": 100 * (b1 - b0) / wall, **result}


async def console_main(port: int, nodes: int) -> dict[str, Any]:
    from bench._console import NAV_CYCLE, BenchApp, Commands, LoopProbe, _ms_stats, say
    from fleetdeck.brokerurl import BrokerURL
    from fleetdeck.console.audit import MemoryAudit

    cmds = Commands()
    app = BenchApp(cluster=CLUSTER, url=BrokerURL("127.0.0.1", port), connect=True, tick_s=0.5,
                   audit=MemoryAudit(), operator="bench", digests=True)
    probe = LoopProbe()
    async with app.run_test(size=(160, 48)):
        feed = app.session.feed
        assert feed is not None
        while feed.conn.state != "connected":  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        say("READY")
        while len(app.state.nodes) < nodes:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        say(f"KNOWN {len(app.state.nodes)}")
        for key in ("2", "3", "4", "5", "1"):
            await app.press_timed(key, True)
        say("WARM")
        t_go, seconds = (float(x) for x in await cmds.next("GO"))
        while time.time() < t_go:  # noqa: ASYNC110
            await asyncio.sleep(0.005)
        applied0, received0 = app.state.applied, feed.received
        probe.start()
        app.measuring = True
        keys: list[float] = []
        i = 0
        while time.time() < t_go + seconds:
            key, switch = NAV_CYCLE[i % len(NAV_CYCLE)]
            i += 1
            keys.append(await app.press_timed(key, switch))
            await asyncio.sleep(0.05)
        applied = app.state.applied - applied0
        received_window = feed.received - received0
        queued_end = feed.queued + app.session.backlog
        await cmds.next("END")
        app.measuring = False
        probe.stop()
        return {"applied": applied, "received": received_window, "queued_end": queued_end,
                "dropped": dict(feed.dropped), "malformed": app.state.malformed.total,
                "nodes_known": len(app.state.nodes),
                "failed_now": sum(1 for st in app.state.nodes.values()
                                  if st.verdict.value == "failed"),
                "tick_ms": _ms_stats([ms / 1000 for _t, ms, _m in app.tick_log]),
                "keys": _ms_stats(keys),
                "stall": _ms_stats(probe.between(t_go, t_go + seconds)),
                "paints": app.paints, "rss_peak_mib": rss_mib(field="VmHWM")}


# --- report --------------------------------------------------------------------------------------


def report(runs: list[dict[str, Any]], dig: dict[str, Any] | None) -> None:
    if runs:
        print(f"collectors on one stream ({runs[0]['nodes']:,} nodes at 1 Hz, v1 samples "
              f"of ~10 KB from bench/_payloads.py):")
        print("| collectors | sent msg/s | per collector: nodes, rx msg/s, applied msg/s, CPU % "
              "| sum rx msg/s | broker CPU % | broker µs/msg | publisher CPU % |")
        print("|---|---|---|---|---|---|---|")
        for r in runs:
            per = "; ".join(f"{name} {p['nodes']}, {p['received_per_s']:,.0f}, "
                            f"{p['applied_per_s']:,.0f}, {p['cpu_pct']:.0f} %"
                            for name, p in r["per"].items())
            print(f"| {r['collectors']} | {r['sent_per_s']:,.0f} | {per} | "
                  f"{r['received_per_s']:,.0f} | {r['broker_cpu_pct']:.0f} | "
                  f"{r['broker_us_per_msg']:.1f} | {r['publisher_cpu_pct']:.0f} |")
    if dig is not None:
        t, k, s = dig["tick_ms"], dig["keys"], dig["stall"]
        print(f"\ndigest console ({dig['nodes']:,} nodes, every digest refreshed every "
              f"{dig['every_s']:g} s, 1 % changing verdict per round):")
        print("| knew every node after | digests sent/s | applied/s | console CPU % | "
              "tick p50 / p99 ms | key p50 / p99 ms | longest stall ms | RSS peak MiB | "
              "broker CPU % |")
        print("|---|---|---|---|---|---|---|---|---|")
        seconds = dig["sent"] / dig["sent_per_s"]
        print(f"| {dig['known_s']:.1f} s | {dig['sent_per_s']:,.0f} | "
              f"{dig['applied'] / seconds:,.0f} | {dig['console_cpu_pct']:.0f} | "
              f"{t['p50_ms']:.0f} / {t['p99_ms']:.0f} | {k['p50_ms']:.0f} / {k['p99_ms']:.0f} | "
              f"{s['max_ms']:.0f} | {dig['rss_peak_mib']:.0f} | {dig['broker_cpu_pct']:.0f} |")
        print(f"  in the window: {dig['sent']:,} sent, {dig['received']:,} received, "
              f"{dig['applied']:,} applied, "
              f"{dig['queued_end']:,} waiting at its end; dropped "
              f"{dig['dropped'] or 0}; malformed {dig['malformed']}; {dig['failed_now']} failed "
              f"now; {dig['paints']} paints")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--role", default="bench")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--nodes", type=int, default=2048)
    p.add_argument("--seconds", type=int, default=10)
    p.add_argument("--collectors", default="1,2,4")
    p.add_argument("--digest-nodes", type=int, default=65536)
    p.add_argument("--digest-seconds", type=int, default=10)
    p.add_argument("--digest-every", type=float, default=5.0,
                   help="refresh period of every digest (collect --digest-every)")
    p.add_argument("--skip-collectors", action="store_true")
    p.add_argument("--skip-digests", action="store_true")
    p.add_argument("--skip-takeover", action="store_true")
    p.add_argument("--takeover-seconds", type=int, default=30,
                   help="how long the stream runs in the takeover part")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args()
    if args.role == "console":
        from fleetdeck.runtime import tune_gc

        tune_gc()
        out = asyncio.run(console_main(args.port, args.digest_nodes))
        from bench._console import say

        say("RESULT " + json.dumps(out))
        return 0
    if args.quick:
        args.nodes, args.seconds, args.digest_nodes, args.digest_seconds = 512, 6, 8192, 6
    runs: list[dict[str, Any]] = []
    if not args.skip_collectors:
        fleet = EvolvingFleet(args.nodes, CLUSTER, bd_seq=int(time.time() * 1000))
        for c in (int(x) for x in args.collectors.split(",")):
            runs.append(collectors_run(args, c, fleet))
            print(f"  {c} collector(s) done", file=sys.stderr, flush=True)
    if not args.skip_collectors and not args.skip_takeover:
        take = takeover_run(args, fleet)
        print(f"takeover: SIGKILL one of {take['collectors']} collectors under the stream "
              f"({take['nodes']:,} nodes at 1 Hz): its {take['victim_nodes']} nodes had digests "
              f"from the survivors {take['takeover_s']:.1f} s later", flush=True)
        runs_extra = {"takeover": take}
    else:
        runs_extra = {}
    dig = None if args.skip_digests else digest_run(args)
    report(runs, dig)
    if args.json:
        Path(args.json).write_text(json.dumps({"collectors": runs, "digests": dig,
                                               **runs_extra}, indent=1))
    return 0


if __name__ == "__main__":
    main_guard(main)
