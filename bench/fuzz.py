"""Fuzz the network-facing path (topic parser, codec, ingest) with mutated real messages.

    python bench/fuzz.py [--cases 100000] [--seed 1]

Each case takes a valid message (birth, status, telemetry, event, ack, job status) from the
simulator and mutates it: byte flips and truncation, field deletion, wrong types, NaN/Infinity,
huge numbers, deep nesting, unicode and wildcards in ids and topics, oversize payloads. Checks:
no exception ever leaves Ingest.handle, and a rejected message stores nothing.
"""

import argparse
import json
import logging
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fleetdeck.console.ingest import Ingest
from fleetdeck.protocol import codec
from fleetdeck.protocol.topics import Kind
from tests.helpers import FakeNode

NASTY_VALUES: list[Any] = [
    None, True, -1, 0, 2**64, 2**200, -(2**70), 1e308, "", "x" * 5000, "gpu/1", "+", "#",
    "n\u0000de", "\u202egpu", "🔥", [], {}, [[[]]], {"a": {"b": {"c": {}}}}, "NaN", 3.5,
]
RAW_TOKENS = [b"NaN", b"Infinity", b"-Infinity", b"1e999", b"\x00", b"\xff", b"}", b"{", b"]"]
TOPIC_NOISE = ["+", "#", "/", "\u0007", " ", "\u00e9", "x" * 300, "", "..", "gpu0002"]


def samples() -> list[tuple[str, bytes]]:
    node = FakeNode("gpu0001", cluster="fuzz")
    from fleetdeck.agents.source import EventDraft
    from fleetdeck.protocol.messages import Ack, AckResult, JobState, JobStatus

    out = [(node.topic(Kind.BIRTH), codec.encode(node.birth())),
           (node.topic(Kind.STATUS), codec.encode(node.status())),
           (node.topic(Kind.TELEMETRY), codec.encode(node.telemetry())),
           (node.topic(Kind.EVENT), codec.encode(node.agent._event(EventDraft("xid", "79")))),
           (node.topic(Kind.ACK), codec.encode(Ack(cmd_id="c1", by="gpu0001",
                                                   result=AckResult.DONE, ts=1))),
           ("fleetdeck/v1/fuzz/job/41/status",
            codec.encode(JobStatus(job_id="41", state=JobState.R, nodes=["gpu0001"], ts=1)))]
    return out


def mutate_json(obj: Any, rng: random.Random, depth: int = 0) -> Any:
    if isinstance(obj, dict) and obj:
        obj = dict(obj)
        key = rng.choice(list(obj))
        action = rng.random()
        if action < 0.3:
            del obj[key]
        elif action < 0.7 or depth > 3:
            obj[key] = rng.choice(NASTY_VALUES)
        else:
            obj[key] = mutate_json(obj[key], rng, depth + 1)
        if rng.random() < 0.1:
            obj[rng.choice(["zzz", "v", "node", "gpus"])] = rng.choice(NASTY_VALUES)
        return obj
    if isinstance(obj, list) and obj:
        obj = list(obj)
        i = rng.randrange(len(obj))
        obj[i] = mutate_json(obj[i], rng, depth + 1) if rng.random() < 0.6 else rng.choice(
            NASTY_VALUES)
        if rng.random() < 0.05:
            obj = obj * 20  # too many GPUs/ports
        return obj
    return rng.choice(NASTY_VALUES)


def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        choice = rng.random()
        pos = rng.randrange(len(b) + 1)
        if choice < 0.4 and b:
            b[min(pos, len(b) - 1)] = rng.randrange(256)
        elif choice < 0.6:
            b[pos:pos] = rng.choice(RAW_TOKENS)
        elif choice < 0.8:
            del b[pos:pos + rng.randint(1, 50)]
        else:
            b = b[:pos]
    return bytes(b)


def case(rng: random.Random, base: list[tuple[str, bytes]]) -> tuple[str, bytes, str]:
    topic, payload = rng.choice(base)
    r = rng.random()
    if r < 0.45:
        mutated = json.dumps(mutate_json(json.loads(payload), rng)).encode()
        kind = "json-mutation"
    elif r < 0.75:
        mutated, kind = mutate_bytes(payload, rng), "byte-mutation"
    elif r < 0.8:
        d = rng.randint(100, 200_000)
        mutated, kind = b"[" * d + b"]" * d, "deep-nesting"
    elif r < 0.85:
        mutated, kind = payload + b" " * rng.randint(64 * 1024, 200_000), "oversize"
    else:
        mutated, kind = payload, "topic-mutation"
    if kind == "topic-mutation" or rng.random() < 0.1:
        parts = topic.split("/")
        i = rng.randrange(len(parts))
        parts[i] = rng.choice(TOPIC_NOISE) if rng.random() < 0.7 else parts[i] + rng.choice(
            TOPIC_NOISE)
        topic = "/".join(parts)
    return topic, mutated, kind


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    logging.disable(logging.WARNING)  # ingest logs rejections; here we count them instead
    rng = random.Random(args.seed)
    base = samples()
    ingest = Ingest("fuzz")
    crashes: list[str] = []
    leaked = 0
    kinds: Counter[str] = Counter()
    accepted = 0
    t0 = time.perf_counter()
    for _ in range(args.cases):
        topic, payload, kind = case(rng, base)
        kinds[kind] += 1
        before_bad = ingest.malformed.total + ingest.ignored
        try:
            ingest.handle(topic, payload, time.time())
        except Exception as err:
            crashes.append(f"{kind}: {type(err).__name__}: {err}"[:200])
            continue
        batch = ingest.take_batch()
        rejected = ingest.malformed.total + ingest.ignored > before_bad
        if rejected and batch.messages:
            leaked += 1
        accepted += batch.messages
    elapsed = time.perf_counter() - t0
    m = ingest.malformed
    print(f"fuzz: {args.cases:,} cases in {elapsed:.1f} s (seed {args.seed})\n")
    print(f"{'outcome':<34}{'count':>10}")
    print(f"{'crashes (exceptions out of ingest)':<34}{len(crashes):>10}")
    print(f"{'rejected but stored (must be 0)':<34}{leaked:>10}")
    print(f"{'accepted (mutation still valid)':<34}{accepted:>10}")
    print(f"{'ignored (not our cluster/topics)':<34}{ingest.ignored:>10}")
    print(f"{'rejected, counted':<34}{m.total:>10}")
    for reason, n in sorted(m.by_reason.items()):
        print(f"{'  ' + reason:<34}{n:>10}")
    print(f"\n{'mutation kind':<34}{'cases':>10}")
    for kind, n in sorted(kinds.items()):
        print(f"{'  ' + kind:<34}{n:>10}")
    if crashes:
        print("\nfirst crashes:", *crashes[:5], sep="\n  ")
    total = accepted + ingest.ignored + m.total + len(crashes)
    assert total == args.cases, (total, args.cases)
    if not accepted:
        # Not even the mild mutations got through: the base samples themselves are invalid,
        # and the run only measured rejecting them.
        print("BENCH FAILED: no case was accepted; the base samples are broken", file=sys.stderr)
    sys.exit(1 if crashes or leaked or not accepted else 0)


if __name__ == "__main__":
    main()
