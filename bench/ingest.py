"""Ingest benchmark: N nodes' telemetry through a real Mosquitto into fleetdeck's fleet state.

Measures, in one run and against the same broker and payloads:
  (a) a bare aiomqtt subscriber's receive rate (the baseline),
  (b) fleetdeck's ingest rate: LiveFeed -> Ingest (validate) -> FleetState on a 0.5 s tick,
  (c) at a paced 1 Hz per node: delivered share, subscriber CPU, sample->state lag p50/p99, RSS.
Each subscriber runs in its own process; the publisher writes pre-built packets (bench/_mqttload.py)
so it costs little CPU on a 2-core machine.

    python bench/ingest.py                 # defaults sized for a 2-core machine (~1-2 min)
    python bench/ingest.py --nodes 16384 --paced 1024,4096,8192
"""

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._mqttload import RawPublisher, paced, publish_packet
from fleetdeck.broker import ManagedBroker

CLUSTER = "bench"


def payload_templates(n: int) -> list[tuple[str, bytes, bytes]]:
    """(topic, head, tail) per node: payload = head + seq,bdSeq,ts + tail, from real sim samples."""
    from fleetdeck.agents.agent import NodeAgent
    from fleetdeck.agents.sim.node import SimNode
    from fleetdeck.brokerurl import BrokerURL
    from fleetdeck.protocol import codec
    from fleetdeck.protocol.topics import Kind, topic_for

    out = []
    proto = None
    for i in range(n):
        node = f"gpu{i + 1:05d}"
        if proto is None or i < 64:
            agent = NodeAgent(cluster=CLUSTER, node_id=node, source=SimNode(node, seed=i),
                              url=BrokerURL("h", 1))
            agent.source.load = 1.0  # type: ignore[attr-defined]
            agent.bd_seq = 1
            raw = codec.encode(agent.telemetry())
            proto = raw
        else:
            raw = proto.replace(b'"node":"gpu00064"', f'"node":"{node}"'.encode(), 1)
        head, rest = raw.split(b'"seq":', 1)
        tail = rest.split(b'"ts":', 1)[1].split(b",", 1)[1]
        out.append((topic_for(CLUSTER, Kind.TELEMETRY, node), head, b"," + tail))
    return out



def publish(url, templates, rounds: int, rate: float | None) -> tuple[int, float]:
    pub = RawPublisher(url.host, url.port, f"bench-pub-{os.getpid()}")
    n = len(templates)
    total = n * rounds
    sent = 0
    t0 = time.perf_counter()
    chunk = 64
    for step in paced(total, rate, chunk) if rate else iter(lambda: chunk, 0):
        if sent >= total:
            break
        size = min(step, total - sent)
        ts = int(time.time() * 1000)
        buf = bytearray()
        for k in range(sent, sent + size):
            topic, head, tail = templates[k % n]
            seq = k // n + 1
            buf += publish_packet(topic, head + f'"seq":{seq},"bdSeq":1,"ts":{ts}'.encode() + tail)
        pub.send(bytes(buf))
        sent += size
    elapsed = time.perf_counter() - t0
    pub.close()
    return sent, elapsed


# --- subscriber processes -----------------------------------------------------------------------


def run_subscriber(kind: str, host: str, port: int, expect: int, idle_s: float) -> None:
    """Child process: receive until ``expect`` messages or ``idle_s`` of silence; print JSON."""
    import aiomqtt

    async def bare() -> dict:
        count = 0
        first = last = None
        async with aiomqtt.Client(host, port, identifier=f"bare-{os.getpid()}",
                                  protocol=aiomqtt.ProtocolVersion.V311) as client:
            await client.subscribe(f"fleetdeck/v1/{CLUSTER}/node/+/telemetry")
            print("READY", flush=True)
            cpu0 = time.process_time()
            it = client.messages.__aiter__()
            while count < expect:
                try:
                    await asyncio.wait_for(it.__anext__(), idle_s)
                except TimeoutError:
                    break
                last = time.perf_counter()
                first = first or last
                count += 1
            cpu = time.process_time() - cpu0
        return {"received": count, "seconds": (last - first) if count > 1 else 0.0, "cpu_s": cpu}

    async def fleet() -> dict:
        from fleetdeck.brokerurl import BrokerURL
        from fleetdeck.console.ingest import Ingest
        from fleetdeck.console.live import LiveFeed
        from fleetdeck.console.state import FleetState

        ingest = Ingest(CLUSTER)
        state = FleetState(CLUSTER, ingest.malformed)
        feed = LiveFeed(BrokerURL(host, port), ingest, client_id=f"fd-{os.getpid()}")
        stop = asyncio.Event()
        task = asyncio.create_task(feed.run(stop))
        while feed.conn.state != "connected":  # noqa: ASYNC110  (a bench, polling is fine)
            await asyncio.sleep(0.01)
        print("READY", flush=True)
        cpu0 = time.process_time()
        lags: list[float] = []
        first = last = None
        quiet_since = time.perf_counter()
        while state.applied < expect:
            await asyncio.sleep(0.5)  # the console's tick
            batch = ingest.take_batch()
            now = time.time()
            if batch.messages:
                last = time.perf_counter()
                first = first or last - 0.5
                quiet_since = last
                lags.extend(now - tel.ts / 1000 for _rx, tel in batch.telemetry.values())
            state.apply(batch, now)
            if time.perf_counter() - quiet_since > idle_s:
                break
        cpu = time.process_time() - cpu0
        stop.set()
        await task
        lags.sort()
        def pct(q):
            return (lags[min(len(lags) - 1, int(q * len(lags)))] if lags else float("nan"))
        return {"received": state.applied + state.malformed.total,
                "validated": state.applied, "nodes": len(state.nodes),
                "seconds": (last - first) if first and last else 0.0, "cpu_s": cpu,
                "lag_p50": pct(0.5), "lag_p99": pct(0.99), "superseded": state.superseded}

    from fleetdeck.runtime import tune_gc

    tune_gc()  # as the console and status do
    result = asyncio.run(bare() if kind == "bare" else fleet())
    result["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result), flush=True)


def measure(kind: str, url, templates, rounds: int, rate: float | None) -> dict:
    expect = len(templates) * rounds
    proc = subprocess.Popen(
        [sys.executable, __file__, "--subscriber", kind, "--port", str(url.port),
         "--expect", str(expect)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "READY"
    sent, pub_s = publish(url, templates, rounds, rate)
    result = json.loads(proc.stdout.readline())
    proc.wait()
    result.update(sent=sent, pub_s=pub_s)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=16384)
    ap.add_argument("--rounds", type=int, default=2, help="samples per node in the burst runs")
    ap.add_argument("--paced", default="1024,4096", help="node counts for the 1 Hz runs")
    ap.add_argument("--paced-seconds", type=int, default=10)
    ap.add_argument("--subscriber", choices=["bare", "fleet"], help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--expect", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.subscriber:
        run_subscriber(args.subscriber, "127.0.0.1", args.port, args.expect, idle_s=3.0)
        return

    print(f"building payloads for {args.nodes} nodes …", file=sys.stderr)
    templates = payload_templates(args.nodes)
    size = len(templates[0][1]) + len(templates[0][2]) + 40
    with ManagedBroker("mosquitto") as broker:
        print(f"broker: {broker.label}; payload ≈ {size} B; cpus: {os.cpu_count()}\n")
        print("Burst: every node publishes", args.rounds, "samples as fast as the publisher can")
        print(f"{'subscriber':<28}{'msgs':>9}{'recv msg/s':>12}{'CPU s':>8}{'µs/msg':>8}"
              f"{'RSS MB':>8}")
        rates = {}
        for kind, label in (("bare", "(a) bare aiomqtt"), ("fleet", "(b) fleetdeck ingest")):
            r = measure(kind, broker.url, templates, args.rounds, None)
            got = r.get("validated", r["received"])
            rate = got / r["seconds"] if r["seconds"] else float("nan")
            rates[kind] = rate
            print(f"{label:<28}{got:>9}{rate:>12,.0f}{r['cpu_s']:>8.1f}"
                  f"{1e6 * r['cpu_s'] / max(1, got):>8.0f}{r['rss_mb']:>8.0f}")
        print(f"{'ratio (b)/(a)':<28}{'':>9}{rates['fleet'] / rates['bare']:>12.2f}\n")

        print("Paced: each node at 1 Hz for", args.paced_seconds, "s (lag = sample ts -> state)")
        print(f"{'nodes':>7}{'delivered':>11}{'CPU %':>8}{'lag p50 ms':>12}{'lag p99 ms':>12}"
              f"{'RSS MB':>8}")
        for n in (int(x) for x in args.paced.split(",")):
            sub = templates[:n]
            r = measure("fleet", broker.url, sub, args.paced_seconds, float(n))
            wall = args.paced_seconds
            print(f"{n:>7}{r['validated'] / r['sent']:>10.1%}{100 * r['cpu_s'] / wall:>8.0f}"
                  f"{1000 * r['lag_p50']:>12.0f}{1000 * r['lag_p99']:>12.0f}{r['rss_mb']:>8.0f}")


if __name__ == "__main__":
    main()
