"""``status --json`` judges through the same console session as the TUI: a symbol-error storm
and a link flap (rules that compare two samples: N2, N4) are ``failed`` there exactly as in a
console watching the same fleet — before the session, status applied one batch and read ``ok``."""

import asyncio
import json
import uuid

from fleetdeck.console.session import ConsoleSession
from tests.conftest import eventually, run_cli, spawn, stop_process

CLUSTER = "sameview"


async def test_symbol_storm_and_link_flap_are_failed_in_status_json_as_in_the_console(
        mosquitto, tmp_path):
    url = str(mosquitto.url)
    sim = spawn("sim", "--broker", url, "--cluster", CLUSTER, "--nodes", "4", "--jobs", "0",
                log=tmp_path / "sim.log")
    session = ConsoleSession(CLUSTER, url=mosquitto.url, client_id=f"t-{uuid.uuid4().hex[:6]}")
    stop = asyncio.Event()
    watcher = asyncio.create_task(session.watch(stop, tick_s=0.5))
    try:
        await eventually(lambda: len(session.state.nodes) == 4
                         and all(n.verdict.value == "ok" for n in session.state.nodes.values()),
                         30, message="fleet up and ok")
        for fault in (["symbol_storm", "node=gpu0002", "port=1", "rate=200"],
                      ["ib_flap", "node=gpu0003", "port=2", "count=3", "every=3s"]):
            out = await asyncio.to_thread(run_cli, "inject", *fault, "--broker", url,
                                          "--cluster", CLUSTER)
            assert out.returncode == 0, out.stderr
        await eventually(lambda: session.state.nodes["gpu0002"].verdict.value == "failed"
                         and session.state.nodes["gpu0003"].verdict.value == "failed", 30,
                         message="the console says failed")
        console = {n: (st.verdict.value, set(st.reasons))
                   for n, st in session.state.nodes.items()}
        res = await asyncio.to_thread(run_cli, "status", "--json", "--broker", url,
                                      "--cluster", CLUSTER)
    finally:
        stop.set()
        await asyncio.gather(watcher, return_exceptions=True)
        stop_process(sim)
    assert res.returncode == 0, res.stderr
    status = {n["id"]: (n["verdict"], set(n["reasons"])) for n in json.loads(res.stdout)["nodes"]}
    assert status["gpu0002"][0] == "failed" and {"N4"} & status["gpu0002"][1]
    assert status["gpu0003"][0] == "failed" and {"N2", "N1"} & status["gpu0003"][1]
    assert {n: v for n, (v, _r) in status.items()} == {n: v for n, (v, _r) in console.items()}
