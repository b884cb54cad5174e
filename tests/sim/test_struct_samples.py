"""Simulated samples built as msgspec Structs (agents/sim/node.py, once the node agent encodes
protocol/fast.py Structs): every sample of a busy, faulted fleet passes the strict pydantic
decoder, the schema's source of truth, and matches the samples built as pydantic models."""

import subprocess
import sys
import textwrap

from tests.conftest import REPO

SCRIPT = textwrap.dedent("""
    import json, msgspec
    import fleetdeck.agents.agent as agent
    from fleetdeck.protocol import codec, fast
    from fleetdeck.protocol.messages import Telemetry
    STRUCTS = {structs}
    if not STRUCTS:  # the pydantic reference: a node agent that built pydantic samples
        agent.fast = None
        agent.Telemetry = Telemetry
    from fleetdeck.agents.sim import node
    from fleetdeck.agents.sim.spec import parse_action
    from fleetdeck.agents.sim.world import SimWorld, WorldOptions
    assert node.SAMPLE_STRUCTS is STRUCTS
    world = SimWorld(WorldOptions(nodes=8, seed=5, background_jobs=2, epoch_ms=1_700_000_000_000))
    for raw in ({{"fault": "symbol_storm", "node": "gpu0002", "port": 3}},
                {{"fault": "xid", "node": "gpu0003", "gpu": 2, "code": 94, "then": 63}},
                {{"fault": "thermal", "node": "gpu0004", "gpu": 1}},
                {{"fault": "ib_flap", "node": "gpu0005", "port": 1}}):
        world.inject(parse_action(raw, default_at=0))
    out = []
    for k in range(12):
        world.step()
        for n in world.nodes:
            r = n.read(0)
            kw = dict(node=n.node_id, seq=k + 1, bdSeq=1, ts=world.wall_ms(world.t),
                      job=r.job, host=r.host, gpus=r.gpus, ib_ports=r.ib_ports)
            wire = (msgspec.json.encode(fast.Telemetry(**kw)) if STRUCTS
                    else codec.encode(Telemetry(**kw)))
            out.append(codec.decode(Telemetry, wire).model_dump(mode="json"))
    print(json.dumps(out))
""")


def samples(structs: bool) -> str:
    res = subprocess.run([sys.executable, "-c", SCRIPT.format(structs=structs)], cwd=REPO,
                         capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_struct_samples_decode_strictly_and_equal_the_pydantic_ones():
    assert samples(True) == samples(False)
