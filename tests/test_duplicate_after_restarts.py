"""H3 counts the agent processes that take turns as one node, not those a restarted agent left
behind: real agent processes, a real Mosquitto, the console's own ingest and state.

2026-12-07 drill: an agent restarted twice, then a cloned VM started with the same node id; the
console that had watched the restarts said "4 agent processes take turns publishing as this
node", a one-shot ``status`` "2"."""

import asyncio
import os
import signal

from tests.conftest import stop_process
from tests.test_agent_lifecycle import Watcher, agent_proc, is_ok, node


def h3(state) -> str:
    st = node(state)
    return next((f.text for f in st.liveness if f.rule == "H3"), "") if st is not None else ""


async def test_two_clones_after_two_restarts_read_as_two_processes(mosquitto, tmp_path):
    procs = []
    try:
        async with Watcher(mosquitto.url) as w:
            for _restart in range(2):
                before = node(w.state).agent_started if node(w.state) is not None else None
                proc = agent_proc(mosquitto.url, tmp_path)
                procs.append(proc)
                await w.until(lambda s, b=before: is_ok(s) and node(s).agent_started != b,
                              20, message="the agent's process heard")
                os.kill(proc.pid, signal.SIGTERM)
                proc.wait(10)
            procs += [agent_proc(mosquitto.url, tmp_path), agent_proc(mosquitto.url, tmp_path)]
            await w.until(lambda s: bool(h3(s)), 30, message="H3 for the two clones")
            assert "duplicate node id: 2 agent processes" in h3(w.state), h3(w.state)
            # Some takeovers later, still two.
            deadline = asyncio.get_running_loop().time() + 5
            while asyncio.get_running_loop().time() < deadline:
                w.tick()
                await asyncio.sleep(0.1)
            assert "duplicate node id: 2 agent processes" in h3(w.state), h3(w.state)
    finally:
        for proc in procs:
            stop_process(proc)
