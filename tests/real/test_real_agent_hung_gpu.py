"""A real agent process whose nvidia-smi hangs (XID 79, a wedged driver), on a real Mosquitto.

Read on the agent's event loop, the hung reader held everything up: the operator's drain of
exactly that node was acknowledged only once nvidia-smi's 10 s timeout ran out, and the node
published nothing meanwhile (docs/reliability.md, "A hung GPU reader")."""

import asyncio
import os
import re
import time
from pathlib import Path

from fleetdeck.protocol.messages import CommandOp
from tests.conftest import spawn, stop_process
from tests.test_agent_lifecycle import Watcher, command, node, send

from .test_real_nvsmi import eight_gpu_csv


def fake_nvidia_smi(tmp_path: Path) -> tuple[Path, Path]:
    """A directory holding an ``nvidia-smi`` that answers eight H100s from a capture, and
    hangs (for a minute, far past its 10 s timeout) while the returned file exists."""
    bindir, hang = tmp_path / "bin", tmp_path / "hang"
    bindir.mkdir()
    csv = tmp_path / "eight.csv"
    csv.write_text(eight_gpu_csv())
    smi = bindir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\nif [ -e {hang} ]; then exec sleep 60; fi\n"
                   f"if [ $# -eq 0 ]; then echo 'CUDA Version: 13.1'; exit 0; fi\n"
                   f"exec cat {csv}\n")
    smi.chmod(0o755)
    return bindir, hang


def waited(text: str) -> int:
    m = re.search(r"no answer for (\d+) s", text)
    return int(m.group(1)) if m else -1


def g1(state) -> str:
    st = node(state)
    return next((f.text for f in st.findings if f.rule == "G1"), "") if st else ""


async def test_a_hung_nvidia_smi_holds_up_neither_the_drain_nor_the_samples(
        mosquitto, tmp_path, node_exporter_sys, monkeypatch):
    bindir, hang = fake_nvidia_smi(tmp_path)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    proc = spawn("agent", "--broker", str(mosquitto.url), "--cluster", "life", "--node-id",
                 "gpu0001", "--source", "sysfs+nvsmi", "--sysfs-root", str(node_exporter_sys),
                 "--interval", "1", "--keepalive", "2", log=tmp_path / "agent.log")
    try:
        async with Watcher(mosquitto.url) as w:
            await w.until(lambda s: node(s) is not None and node(s).gpus_present == 8,
                          message="eight GPUs read")
            hang.touch()
            await asyncio.sleep(1.5)  # a sample's nvidia-smi is hung now
            drain = command(CommandOp.DRAIN, reason="xid 79 on gpu3")
            t0 = time.monotonic()
            await send(mosquitto.url, drain)
            await w.until(lambda s: any(a.cmd_id == drain.cmd_id for a in w.acks),
                          timeout=9, message="the drain acknowledged")
            acked = time.monotonic() - t0
            assert acked < 3, f"drain acknowledged {acked:.1f} s after it was sent"
            # The node says which reader hangs and for how long, in G1: neither silent (stale)
            # nor healthy, nor the last figures again.
            await w.until(lambda s: "nvsmi: no answer for" in g1(s), timeout=3,
                          message="G1 names the hung reader")
            first = waited(g1(w.state))
            await w.until(lambda s: waited(g1(s)) >= first + 2, timeout=4,
                          message="how long, growing")
            st = node(w.state)
            assert st.gpus_present == 0 and st.verdict.value == "failed", st.verdict
            assert st.drain.state.value == "drained"
            # The InfiniBand ports are read all along.
            assert st.ib_ports_up == 3 and "N7" not in st.reasons, st.reasons
    finally:
        stop_process(proc)
    log = (tmp_path / "agent.log").read_text()
    assert "Traceback" not in log, log
