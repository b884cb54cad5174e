"""Receive cost: subscriber CPU per message, aiomqtt vs the console's transport, side by side.

One paced QoS 0 stream from one publisher process (this one, writing pre-built packets: it costs
little) goes through one Mosquitto to two subscriber processes connected at the same time:

* ``aiomqtt``: the console's receive path before fleetdeck/transport.py: ``make_client`` with
  the console's settings, ``async for message in client.messages``, nothing done per message;
* ``transport``: ``LiveFeed`` on ``fleetdeck.transport`` (gmqtt), its buffer and its sliced pump
  handing every message to an ingest that only counts (so this is receive + hand-off, not
  validation).

Each subscriber reports ``time.process_time()`` spent from its SUBACK until the stream ended
(an idle asyncio loop costs next to nothing) and how many messages reached it; CPU per message
is per message that reached the client (including those its bounded queue then discarded).
Side by side, both see the same stream on the same loaded machine, so their ratio is the figure
to trust; the absolute µs move with the machine's load (six engineers share 2 cores here).

    .venv/bin/python -m bench.receive [--rate 8000] [--seconds 10] [--sizes 10240,1600]

Fails loudly (``BENCH FAILED:``, exit 1) when nothing was published or a subscriber got nothing.
"""

import argparse
import asyncio
import json
import logging
import subprocess
import sys
import time
import uuid
from pathlib import Path

from bench._common import main_guard, require
from bench._mqttload import RawPublisher, paced, publish_parts, topic_field
from fleetdeck.broker import MOSQUITTO, ManagedBroker
from fleetdeck.brokerurl import BrokerURL

CLUSTER = "rxbench"
FILTER = f"fleetdeck/v1/{CLUSTER}/node/+/telemetry"
SUBSCRIBERS = ("aiomqtt", "transport")
NODES = 16_384
IDLE_END_S = 3.0
"""A subscriber that got nothing new for this long after its first message is done."""


# --- subscriber processes --------------------------------------------------------------------


class _CountingIngest:
    """Stands in for console/ingest.py: counts, validates nothing (not what is measured)."""

    def __init__(self) -> None:
        self.cluster = CLUSTER
        self.count = 0

    def handle(self, topic: str, payload: bytes, rx_ts: float) -> None:
        self.count += 1


async def _watch(count, expected: int, deadline: float) -> None:
    """Until ``expected`` messages, or idle for IDLE_END_S after the first, or ``deadline``."""
    last, last_change = 0, time.monotonic()
    while time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        n = count()
        if n >= expected:
            return
        if n != last:
            last, last_change = n, time.monotonic()
        elif n and time.monotonic() - last_change > IDLE_END_S:
            return


class _CountDiscards(logging.Filter):
    """aiomqtt logs each message its full queue discards (instead of counting them): count
    them here, print nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.discarded = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if "queue is full" in record.getMessage():
            self.discarded += 1
        return False


async def _sub_aiomqtt(url: BrokerURL, expected: int, deadline: float) -> dict[str, float]:
    from fleetdeck.brokerurl import make_client
    from fleetdeck.console.live import MAX_PENDING

    discards = _CountDiscards()
    logging.getLogger("mqtt").addFilter(discards)
    got = [0]
    client = make_client(url, f"rx-aiomqtt-{uuid.uuid4().hex[:6]}", keepalive=10,
                         max_queued_incoming=MAX_PENDING)
    async with client:
        await client.subscribe(FILTER, qos=1)
        cpu0 = time.process_time()
        print("READY", flush=True)

        async def read() -> None:
            async for message in client.messages:
                _ = message.payload
                got[0] += 1

        reader = asyncio.create_task(read())
        await _watch(lambda: got[0] + discards.discarded, expected, deadline)
        cpu1 = time.process_time()
        reader.cancel()
    return {"received": got[0] + discards.discarded, "passed": got[0], "cpu_s": cpu1 - cpu0,
            "queue_hwm": float("nan")}


async def _sub_transport(url: BrokerURL, expected: int, deadline: float) -> dict[str, float]:
    from fleetdeck.console.live import LiveFeed

    ingest = _CountingIngest()
    feed = LiveFeed(url, ingest, client_id=f"rx-transport-{uuid.uuid4().hex[:6]}")  # type: ignore[arg-type]
    feed.link.filters = [FILTER]
    stop = asyncio.Event()
    runner = asyncio.create_task(feed.run(stop))
    while feed.conn.state != "connected":
        require(not runner.done(), f"transport subscriber: {feed.first_error}")
        require(time.monotonic() < deadline, "transport subscriber never connected")
        await asyncio.sleep(0.01)
    cpu0 = time.process_time()
    print("READY", flush=True)
    await _watch(lambda: feed.received, expected, deadline)
    cpu1 = time.process_time()
    stop.set()
    await runner
    return {"received": feed.received, "passed": ingest.count, "cpu_s": cpu1 - cpu0,
            "queue_hwm": feed.queue_hwm}


def subscriber(kind: str, port: int, expected: int, timeout_s: float) -> None:
    url = BrokerURL("127.0.0.1", port)
    deadline = time.monotonic() + timeout_s
    run = _sub_aiomqtt if kind == "aiomqtt" else _sub_transport
    res = asyncio.run(run(url, expected, deadline))
    print(json.dumps({"kind": kind, **res}), flush=True)


# --- the run ---------------------------------------------------------------------------------


def publish(port: int, size: int, rate: float, total: int) -> float:
    """The paced stream; returns its wall seconds."""
    payload = b"x" * size
    topics = [topic_field(f"fleetdeck/v1/{CLUSTER}/node/gpu{i + 1:05d}/telemetry")
              for i in range(NODES)]
    pub = RawPublisher("127.0.0.1", port, f"rx-pub-{uuid.uuid4().hex[:6]}")
    t0 = time.perf_counter()
    i = 0
    for n in paced(total, rate, 64):
        parts: list[bytes] = []
        for _ in range(n):
            parts.extend(publish_parts(topics[i % NODES], payload))
            i += 1
        pub.send_parts(parts)
    wall = time.perf_counter() - t0
    pub.close()
    require(i == total, f"the publisher sent {i} of {total} messages")
    return wall


def one_size(port: int, size: int, rate: float, seconds: float) -> list[dict[str, float | str]]:
    total = int(rate * seconds)
    timeout = seconds * 3 + 30
    procs = {
        kind: subprocess.Popen(
            [sys.executable, "-m", "bench.receive", "--subscriber", kind, "--port", str(port),
             "--expected", str(total), "--timeout", str(timeout)],
            stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parent.parent)
        for kind in SUBSCRIBERS
    }
    try:
        for kind, proc in procs.items():
            assert proc.stdout is not None
            line = proc.stdout.readline().strip()
            require(line == "READY", f"{kind} subscriber did not start ({line or 'no output'})")
        wall = publish(port, size, rate, total)
        rows = []
        for kind, proc in procs.items():
            out, _ = proc.communicate(timeout=timeout + 10)
            require(proc.returncode == 0, f"{kind} subscriber exited {proc.returncode}")
            res = json.loads(out.strip().splitlines()[-1])
            got = int(res["received"])
            require(got > 0 and res["passed"] > 0,
                    f"{kind} subscriber received nothing of {total} ({size} B)")
            rows.append({"size": size, "kind": kind, "sent": total, "received": got,
                         "passed": int(res["passed"]), "delivered_pct": 100.0 * got / total,
                         "us_per_msg": res["cpu_s"] / got * 1e6,
                         "core_pct": 100.0 * res["cpu_s"] / wall,
                         "queue_hwm": res["queue_hwm"]})
        return rows
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def buffer_overhead_us(n: int = 200_000, reps: int = 5) -> float:
    """LiveFeed's own share per message, in process (no socket): the read-loop append and the
    pump's hand-off to an ingest that only counts; median of ``reps`` CPU-timed passes."""
    from fleetdeck.console.live import LiveFeed

    ingest = _CountingIngest()
    feed = LiveFeed(BrokerURL("127.0.0.1", 1), ingest, client_id="micro")  # type: ignore[arg-type]
    topic, payload = f"fleetdeck/v1/{CLUSTER}/node/gpu00001/telemetry", b"x" * 1600
    received = feed._received
    samples = []
    for _ in range(reps):
        t0 = time.process_time()
        for _ in range(n // 1000):
            for _ in range(1000):
                received(topic, payload, 0, False)
            feed.hand(None)
        samples.append((time.process_time() - t0) / n * 1e6)
    require(ingest.count == n * reps, "the micro-benchmark handed nothing to ingest")
    return sorted(samples)[reps // 2]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--rate", type=float, default=8000.0, help="messages per second")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--sizes", default="10240,1600", help="payload bytes, comma-separated")
    ap.add_argument("--runs", type=int, default=1, help="repeat each size this many times")
    ap.add_argument("--subscriber", choices=SUBSCRIBERS, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--expected", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--timeout", type=float, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.subscriber:
        subscriber(args.subscriber, args.port, args.expected, args.timeout)
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    rows: list[dict[str, float | str]] = []
    with ManagedBroker(MOSQUITTO) as broker:
        for size in sizes:
            for _ in range(args.runs):
                rows += one_size(broker.port, size, args.rate, args.seconds)
    print(f"receive cost, {args.rate:,.0f} msg/s for {args.seconds:g} s, both subscribers on "
          f"the same stream at once (subscriber CPU = time.process_time)")
    print("(received: arrived at the client; passed: handed on by it; aiomqtt's bounded queue "
          "discards the newest when behind, LiveFeed sheds the oldest telemetry)")
    print("| payload | subscriber | sent | received | delivered | passed on | CPU µs/msg "
          "| CPU % of a core |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['size']:,} B | {r['kind']} | {r['sent']:,} | {r['received']:,} | "
              f"{r['delivered_pct']:.1f} % | {r['passed']:,} | {r['us_per_msg']:.1f} | "
              f"{r['core_pct']:.1f} |")
    print(f"LiveFeed's own buffer + hand-off, in process: {buffer_overhead_us():.2f} µs/msg "
          "(median of 5 runs of 200,000, CPU time)")
    for size in sizes:
        a = [r["us_per_msg"] for r in rows if r["size"] == size and r["kind"] == "aiomqtt"]
        t = [r["us_per_msg"] for r in rows if r["size"] == size and r["kind"] == "transport"]
        ratios = sorted(float(x) / float(y) for x, y in zip(t, a, strict=True))
        print(f"{size:,} B: transport / aiomqtt CPU per message = "
              f"{ratios[len(ratios) // 2]:.2f} (median of {len(ratios)} run(s); "
              f"range {ratios[0]:.2f}-{ratios[-1]:.2f})")
    return 0


if __name__ == "__main__":
    main_guard(main)
