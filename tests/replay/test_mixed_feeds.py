"""A recording made where sharded collectors run holds both the nodes' own messages and the
collectors' digests of them (``fleetdeck record`` keeps everything under the cluster's root).
A live console on raw telemetry never subscribes to digests; its replay applied them on top of
the raw state, so a node showed a digest's port count beside its own telemetry's (IB ports 1,
up 8), an owner and a D1 "no digest" staleness the console never showed (found replaying a
recording of a hostile publisher)."""

import json

from fleetdeck.protocol import codec
from fleetdeck.protocol.topics import ROOT, Kind
from tests.helpers import FakeNode
from tests.replay.test_damage import T0, message, replay, write


def header() -> str:
    return json.dumps({"fleetdeck_recording": 1, "cluster": "mix", "started": T0,
                       "fleetdeck": "0.1.0", "source": "test"})


def digest(node: str, ts_ms: int) -> bytes:
    return json.dumps({
        "v": 1, "node": node, "by": "shard-1", "ts": ts_ms, "verdict": "failed",
        "findings": [{"rule": "G1", "severity": "drain", "component": "gpu2",
                      "text": "7/8 GPUs visible"}],
        "online": True, "stale": False,
        "drain": {"state": "none", "reason": "", "requested_by": "", "cmd_id": ""},
        "job": None, "ranks_on_node": 0, "gpus_expected": 8,
        "gpus": [{"index": 0, "present": True, "util_pct": 1.0, "temp_c": 40.0,
                  "power_w": 100.0}],
        "ports": [{"dev": "mlx5_ib0", "port": 1, "up": True}],
        "leaf": "leaf01", "rack": "rack001", "interval_s": 1.0, "last_seen_s": 0.1,
        "seq_gaps": 0, "every_s": 5.0}).encode()


def test_replay_of_raw_and_digests_shows_what_the_raw_console_showed(tmp_path):
    node = FakeNode("gpu0001", cluster="mix", t0=T0)
    dig = f"{ROOT}/mix/digest/gpu0001"
    lines = [header(),
             # The retained digest comes first, as from a broker that holds both.
             message(T0, dig, digest("gpu0001", int(T0 * 1000)), True),
             message(T0, node.topic(Kind.BIRTH), codec.encode(node.birth()), True),
             message(T0, node.topic(Kind.STATUS), codec.encode(node.status()), True)]
    for s in range(1, 13):
        lines.append(message(T0 + s, node.topic(Kind.TELEMETRY),
                             codec.encode(node.telemetry())))
        if s == 2:
            lines.append(message(T0 + s, dig, digest("gpu0001", int((T0 + s) * 1000))))
    res = replay(write(tmp_path / "mix.jsonl", lines))
    assert res.returncode == 0, res.stderr
    (n,) = json.loads(res.stdout)["nodes"]
    assert (n["verdict"], n["owner"], n["findings"]) == ("ok", None, []), n
    assert n["ib_ports"] == n["ib_ports_up"] == 8, n
