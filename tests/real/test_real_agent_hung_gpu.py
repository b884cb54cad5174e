"""A real agent process whose nvidia-smi hangs (XID 79, a wedged driver), or is only slow, or
whose NVML does not shut down, on a real Mosquitto.

Read on the agent's event loop, the hung reader held everything up: the operator's drain of
exactly that node was acknowledged only once nvidia-smi's 10 s timeout ran out, and the node
published nothing meanwhile (docs/reliability.md, "A hung GPU reader"). Waited for 0.75 of the
interval and called hung past it, a slow one failed a healthy node (docs/reliability.md, "A
slow GPU reader is not a hung one")."""

import asyncio
import os
import re
import subprocess
import time
from pathlib import Path

from fleetdeck.agents.real.source import GPU_HUNG_S
from fleetdeck.protocol.messages import CommandOp
from tests.conftest import spawn, stop_process
from tests.test_agent_lifecycle import Watcher, command, node, send

from .test_real_nvsmi import eight_gpu_csv


def fake_nvidia_smi(tmp_path: Path, delay_s: float = 0.0) -> tuple[Path, Path]:
    """A directory holding an ``nvidia-smi`` that answers eight H100s from a capture after
    ``delay_s``, and hangs (for a minute, far past its 10 s timeout) while the returned file
    exists. Each records its pid in ``tmp_path / "pids"``."""
    bindir, hang = tmp_path / "bin", tmp_path / "hang"
    bindir.mkdir()
    csv = tmp_path / "eight.csv"
    csv.write_text(eight_gpu_csv())
    smi = bindir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\necho $$ >> {tmp_path / 'pids'}\n"
                   f"if [ -e {hang} ]; then exec sleep 60; fi\n"
                   f"sleep {delay_s}\n"
                   f"if [ $# -eq 0 ]; then echo 'CUDA Version: 13.1'; exit 0; fi\n"
                   f"exec cat {csv}\n")
    smi.chmod(0o755)
    return bindir, hang


def smi_pids(tmp_path: Path) -> list[int]:
    pids = tmp_path / "pids"
    return [int(p) for p in pids.read_text().split()] if pids.exists() else []


INTERVAL = 1


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
                 "--interval", str(INTERVAL), "--keepalive", "2", log=tmp_path / "agent.log")
    try:
        async with Watcher(mosquitto.url) as w:
            await w.until(lambda s: node(s) is not None and node(s).gpus_present == 8,
                          message="eight GPUs read")
            hang.touch()
            hung_at = time.monotonic()
            await asyncio.sleep(1.5)  # a sample's nvidia-smi is hung now
            drain = command(CommandOp.DRAIN, reason="xid 79 on gpu3")
            t0 = time.monotonic()
            await send(mosquitto.url, drain)
            await w.until(lambda s: any(a.cmd_id == drain.cmd_id for a in w.acks),
                          timeout=9, message="the drain acknowledged")
            acked = time.monotonic() - t0
            assert acked < 3, f"drain acknowledged {acked:.1f} s after it was sent"
            # The node says which reader hangs and for how long, in G1: neither silent (stale)
            # nor healthy, nor the last figures again. Hung, not slow, once its call is
            # GPU_HUNG_S old: said at the first sample after, the call having started at the
            # first sample after the hang (docs/reliability.md, "A slow GPU reader is not a
            # hung one").
            await w.until(lambda s: "nvsmi: no answer for" in g1(s), timeout=GPU_HUNG_S + 4,
                          message="G1 names the hung reader")
            said_after = time.monotonic() - hung_at
            first = waited(g1(w.state))
            assert first >= GPU_HUNG_S and said_after < GPU_HUNG_S + 2 * INTERVAL + 1, (
                f"hung said {said_after:.1f} s after the hang, as {first} s")
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


SLOW_S = 0.9
"""nvidia-smi on a loaded eight-GPU node: 0.3-1.5 s (docs/real-nodes.md); over the 0.75 s a
sample waits at ``--interval 1``."""


async def test_a_slow_nvidia_smi_is_not_reported_hung(
        mosquitto, tmp_path, node_exporter_sys, monkeypatch):
    """Every read "missed its deadline": G1 "0/8 GPUs visible; … nvsmi: no answer for 1 s",
    and the birth had no GPUs at all; an operator would have drained a healthy node."""
    bindir, _ = fake_nvidia_smi(tmp_path, delay_s=SLOW_S)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    proc = spawn("agent", "--broker", str(mosquitto.url), "--cluster", "life", "--node-id",
                 "gpu0001", "--source", "sysfs+nvsmi", "--sysfs-root", str(node_exporter_sys),
                 "--interval", str(INTERVAL), "--keepalive", "2", log=tmp_path / "agent.log")

    def figures(s) -> list[float | None]:
        t = node(s).telemetry if node(s) is not None else None
        return [g.temp_c for g in t.gpus if g.present] if t is not None else []

    try:
        async with Watcher(mosquitto.url) as w:
            await w.until(lambda s: len(node(s).birth.gpus) == 8 if node(s) and node(s).birth
                          else False, message="a birth with its eight GPUs")
            await w.until(lambda s: figures(s) == [59.0] * 8, message="the GPUs' figures")
            # Longer than a hung reader takes to be said (GPU_HUNG_S): every sample has its
            # eight GPUs, with figures, and says how old they are; never G1.
            seqs: set[int] = set()
            end = time.monotonic() + GPU_HUNG_S + 2
            while time.monotonic() < end:
                w.tick()
                st = node(w.state)
                assert not g1(w.state), g1(w.state)
                assert st.gpus_present == 8 and figures(w.state) == [59.0] * 8
                said = st.telemetry.agent.errors
                assert said and said[0].startswith(
                    "nvsmi: answers slower than a sample waits (0.75 s): these GPU figures are"
                ), said
                seqs.add(st.telemetry.seq)
                await asyncio.sleep(0.05)
            assert len(seqs) >= GPU_HUNG_S, f"{len(seqs)} samples in {GPU_HUNG_S + 2:g} s"
            assert "G1" not in st.reasons, st.reasons  # (the fixture's down port fails it: N1)
    finally:
        stop_process(proc)
    log = (tmp_path / "agent.log").read_text()
    assert "Traceback" not in log and "hung?" not in log, log


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


STUCK_IN_THE_DRIVER = """\
from fleetdeck.agents.real import nvsmi, source

# Asked again within the test's window: at its 10 s timeout and 60 s retry, a single nvidia-smi
# ran all along, and "one at a time" held whatever the reader did.
nvsmi.HUNG_RETRY_S, nvsmi.REAP_WAIT_S = 0.5, 0.2
source.make_real_source.__kwdefaults__["nvsmi_timeout_s"] = 1.0

# Each one killed past its timeout stays, stuck in the driver (state D outlives SIGKILL), until
# the driver lets go as the agent stops.
_kill, _close, _stopping = nvsmi.kill_group, nvsmi.NvsmiReader.close, []


def _stuck_kill(proc):
    if _stopping:
        _kill(proc)


def _close_and_let_go(self):
    _stopping.append(True)
    _close(self)


nvsmi.kill_group, nvsmi.NvsmiReader.close = _stuck_kill, _close_and_let_go
"""


async def test_an_agent_stopped_while_nvidia_smi_hangs_leaves_none_behind(
        mosquitto, tmp_path, node_exporter_sys, monkeypatch):
    """One nvidia-smi at a time while it hangs, though each is asked again past its timeout,
    and none left once the agent stopped: it outlived the agent, for as long as it hung."""
    bindir, hang = fake_nvidia_smi(tmp_path)
    hang.touch()  # hung from the start
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(STUCK_IN_THE_DRIVER)
    monkeypatch.setenv("PYTHONPATH", f"{site}:{os.environ.get('PYTHONPATH', '')}")
    proc = spawn("agent", "--broker", str(mosquitto.url), "--cluster", "life", "--node-id",
                 "gpu0001", "--source", "sysfs+nvsmi", "--sysfs-root", str(node_exporter_sys),
                 "--interval", str(INTERVAL), "--keepalive", "2", log=tmp_path / "agent.log")
    try:
        most = 0
        end = time.monotonic() + GPU_HUNG_S + 2  # past the first inventory's wait, hung
        while time.monotonic() < end:
            most = max(most, sum(running(p) for p in smi_pids(tmp_path)))
            await asyncio.sleep(0.05)
        assert smi_pids(tmp_path) and most == 1, (most, smi_pids(tmp_path))
        log = (tmp_path / "agent.log").read_text()
        assert "no other is started" in log, log  # asked again within the window, and refused
    finally:
        t0 = time.monotonic()
        rc = stop_process(proc)
        took = time.monotonic() - t0
        left = [p for p in smi_pids(tmp_path) if running(p)]
        for p in left:
            os.kill(p, 9)
    assert rc == 0 and took < 10, (rc, took)
    assert not left, f"nvidia-smi {left} outlived the agent"


STOP_TIMEOUT_S = 20.0
"""agents/systemd/fleetdeck-agent.service, ``TimeoutStopSec``."""


async def test_an_agent_whose_nvml_shutdown_hangs_still_exits(
        mosquitto, tmp_path, node_exporter_sys, monkeypatch):
    """``nvmlShutdown`` on a wedged driver blocks in the kernel for ever, as every NVML call
    then does: the stopped agent never exited, and systemd killed it 20 s later
    (``TimeoutStopSec``), its unit failed."""
    lib, called = tmp_path / "lib", tmp_path / "shutdown-called"
    lib.mkdir()
    (lib / "pynvml.py").write_text(
        "import time\n"
        "from tests.real.test_real_nvml import fake_nvml\n"
        "globals().update(vars(fake_nvml(8)))\n"
        "def nvmlShutdown():\n"
        f"    open({str(called)!r}, 'w').close()\n"
        "    time.sleep(3600)  # a wedged driver\n")
    monkeypatch.setenv("PYTHONPATH", f"{lib}:{os.environ.get('PYTHONPATH', '')}")
    proc = spawn("agent", "--broker", str(mosquitto.url), "--cluster", "life", "--node-id",
                 "gpu0001", "--source", "sysfs+nvml", "--sysfs-root", str(node_exporter_sys),
                 "--interval", str(INTERVAL), "--keepalive", "2", log=tmp_path / "agent.log")
    try:
        async with Watcher(mosquitto.url) as w:
            await w.until(lambda s: node(s) is not None and node(s).gpus_present == 8,
                          message="eight GPUs read through NVML")
    finally:
        t0 = time.monotonic()
        proc.terminate()
        try:
            rc = proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            rc = None
        took = time.monotonic() - t0
        stop_process(proc)
    log = (tmp_path / "agent.log").read_text()
    assert called.exists(), log
    assert rc == 0 and took < STOP_TIMEOUT_S / 2, (
        f"the agent stopped after {took:.1f} s (rc {rc}); systemd kills it at "
        f"{STOP_TIMEOUT_S:g} s", log)
    assert "did not close within" in log, log
