"""A real agent process whose sysfs read hangs, and agents whose IB, /proc, kernel-log or GPU
reader hangs, on a real Mosquitto: a rebirth asked meanwhile must not hold up the drain that
follows it.

The sample had a deadline, but the read thread kept the source's lock while it hung, and the
birth's inventory waited on that lock with none: a REBIRTH command (or a console's
``ctl/rebirth``) never finished, and, holding the agent's command lock, it kept the operator's
drain of that node unanswered for as long as the reader hung (a review; docs/reliability.md,
"A hung GPU reader")."""

import asyncio
import contextlib
import os
import threading
import time
import uuid
from pathlib import Path

import aiomqtt
import pytest

from fleetdeck.agents.agent import NodeAgent
from fleetdeck.agents.real.common import GpuInventoryResult
from fleetdeck.agents.real.source import HostReader, RealSource, ib_class_dir
from fleetdeck.agents.real.sysfs_ib import IbReader
from fleetdeck.protocol import codec
from fleetdeck.protocol.fast import GpuSample, HostSample, IbPortInventory, IbPortSample
from fleetdeck.protocol.messages import AckResult, Birth, CommandOp
from fleetdeck.protocol.topics import Kind, topic_for
from tests.conftest import eventually, spawn, stop_process
from tests.test_agent_lifecycle import CLUSTER, Watcher, command, node, send

HUNG = "mlx4_0/ports/1/counters/link_downed"
"""A counter file every sysfs read and scan opens: a FIFO there blocks ``open`` as a wedged
driver's attribute does."""


async def ask_rebirth(url) -> None:
    """What a console starting mid-stream sends (``ctl/rebirth``)."""
    async with aiomqtt.Client(url.host, url.port, identifier=f"op-{uuid.uuid4().hex[:6]}",
                              protocol=aiomqtt.ProtocolVersion.V311) as c:
        await c.publish(topic_for(CLUSTER, Kind.REBIRTH), b"", qos=1)


async def test_a_hung_sysfs_read_holds_up_neither_a_rebirth_nor_the_drain_after_it(
        mosquitto, tmp_path, node_exporter_sys):
    counter = node_exporter_sys / "class" / "infiniband" / HUNG
    births: list[Birth] = []

    async def listen(ready: asyncio.Event) -> None:
        async with aiomqtt.Client(mosquitto.url.host, mosquitto.url.port,
                                  identifier=f"births-{uuid.uuid4().hex[:6]}",
                                  protocol=aiomqtt.ProtocolVersion.V311) as c:
            await c.subscribe(topic_for(CLUSTER, Kind.BIRTH, "gpu0001"), qos=1)
            ready.set()
            async for m in c.messages:
                births.append(codec.decode(Birth, m.payload))

    proc = spawn("agent", "--broker", str(mosquitto.url), "--cluster", CLUSTER, "--node-id",
                 "gpu0001", "--source", "sysfs", "--sysfs-root", str(node_exporter_sys),
                 "--interval", "1", "--keepalive", "2", log=tmp_path / "agent.log")
    ready = asyncio.Event()
    listener = asyncio.create_task(listen(ready))
    writer = -1
    try:
        await asyncio.wait_for(ready.wait(), 5)
        async with Watcher(mosquitto.url) as w:
            await w.until(lambda s: node(s) is not None and node(s).ib_ports_up == 3,
                          message="the IB ports read")
            counter.unlink()
            os.mkfifo(counter)
            await asyncio.sleep(1.5)  # a sample's sysfs read is hung in open() now
            before = len(births)
            rebirth = command(CommandOp.REBIRTH)
            await send(mosquitto.url, rebirth)
            await ask_rebirth(mosquitto.url)
            drain = command(CommandOp.DRAIN, reason="hca wedged")
            t0 = time.monotonic()
            await send(mosquitto.url, drain)
            await w.until(lambda s: any(a.cmd_id == drain.cmd_id for a in w.acks),
                          timeout=15, message="the drain acknowledged")
            acked = time.monotonic() - t0
            # Behind two rebirths: the first waits at most its deadline (2 intervals + 1 s),
            # the second not again.
            assert acked < 5, f"drain acknowledged {acked:.1f} s after it was sent"
            await w.until(lambda s: node(s).drain.state.value == "drained", timeout=2,
                          message="the node drained")
            assert [a.result for a in w.acks if a.cmd_id == rebirth.cmd_id] == [AckResult.DONE]
            # Both rebirths published a birth: the last inventory again, saying why.
            await eventually(lambda: len(births) >= before + 2, 5, message="two births")
            for b in births[before:]:
                assert len(b.ib_ports) == 3, b.ib_ports
                assert any("sysfs" in e and "no answer for" in e for e in b.errors), b.errors

            # The reader answers again (the FIFO gets a writer, the counter is a file again):
            # the next birth is a fresh inventory.
            writer = os.open(counter, os.O_WRONLY | os.O_NONBLOCK)
            counter.with_name("fresh").write_text("0\n")
            counter.with_name("fresh").replace(counter)
            os.write(writer, b"0\n")
            os.close(writer)
            writer = -1
            await asyncio.sleep(1)
            seen = len(births)
            await ask_rebirth(mosquitto.url)
            await eventually(lambda: len(births) > seen and not any(
                "no answer" in e for e in births[-1].errors), 10, message="a fresh birth")
    finally:
        if writer >= 0:
            os.close(writer)
        listener.cancel()
        stop_process(proc)
    log = (tmp_path / "agent.log").read_text()
    assert "Traceback" not in log, log


class Gate:
    """Readers pass while it is open, and hang (until released) once it is shut."""

    def __init__(self) -> None:
        self.shut = threading.Event()
        self.released = threading.Event()

    def pass_(self) -> None:
        if self.shut.is_set():
            self.released.wait(60)


def hanging_source(reader: str, sysfs: Path, gate: Gate) -> RealSource:
    """A ``sysfs+nvsmi`` node with a kernel log, whose ``reader`` hangs once ``gate`` shuts."""

    class Ib(IbReader):
        def read(self, now: float) -> tuple[list[IbPortSample], list[str]]:
            if reader == "ib":
                gate.pass_()
            return super().read(now)

        def inventory(self) -> tuple[list[IbPortInventory], list[str]]:
            if reader == "ib":
                gate.pass_()
            return super().inventory()

    class Host(HostReader):
        def read(self, errors: list[str]) -> HostSample:
            if reader == "host":
                gate.pass_()
            return super().read(errors)

    class Gpu:
        name = "nvsmi"

        def inventory(self) -> GpuInventoryResult:
            if reader == "gpu":
                gate.pass_()
            return GpuInventoryResult(gpus=[])

        def read(self) -> tuple[list[GpuSample], list[str]]:
            if reader == "gpu":
                gate.pass_()
            return [], []

        def close(self) -> None:
            return None

    class KernelLog:
        error: str | None = None
        history = False

        def poll(self) -> list[str]:
            if reader == "kernel log":
                gate.pass_()
            return []

        def close(self) -> None:
            return None

    return RealSource("sysfs+nvsmi", ib=Ib(ib_class_dir(sysfs)), gpu=Gpu(),
                      kernel_log=KernelLog(), host=Host(), gpu_deadline_s=0.75)


@pytest.mark.parametrize(("reader", "said"), [
    ("ib", "hung: sysfs read"),
    ("host", "hung: host read"),
    ("kernel log", "hung: kernel log"),
    ("gpu", "nvsmi: no answer for"),
])
async def test_a_rebirth_then_a_drain_are_answered_while_any_reader_hangs(
        mosquitto, node_exporter_sys, reader, said):
    gate = Gate()
    agent = NodeAgent(cluster=CLUSTER, node_id="gpu0001", url=mosquitto.url,
                      source=hanging_source(reader, node_exporter_sys, gate),
                      interval_s=1.0, keepalive=2, phase_s=0.0)
    stop = asyncio.Event()
    run = asyncio.create_task(agent.run(stop))
    try:
        async with Watcher(mosquitto.url) as w:
            await w.until(lambda s: node(s) is not None and node(s).ib_ports_up == 3,
                          message="the IB ports read")
            gate.shut.set()
            await asyncio.sleep(1.5)  # a sample's reader is hung now
            rebirth = command(CommandOp.REBIRTH)
            await send(mosquitto.url, rebirth)
            drain = command(CommandOp.DRAIN, reason="a reader hangs")
            t0 = time.monotonic()
            await send(mosquitto.url, drain)
            await w.until(lambda s: any(a.cmd_id == drain.cmd_id for a in w.acks),
                          timeout=15, message="the drain acknowledged")
            acked = time.monotonic() - t0
            assert acked < 5, f"drain acknowledged {acked:.1f} s after it was sent"
            assert [a.result for a in w.acks if a.cmd_id == rebirth.cmd_id] == [AckResult.DONE]
            # The birth the REBIRTH published says which reader hangs.
            await w.until(lambda s: any(said in e for e in node(s).birth.errors), timeout=3,
                          message=f"the birth says {said!r}")
            assert len(node(w.state).birth.ib_ports) == 3
    finally:
        stop.set()
        gate.released.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(run, 10)


async def test_a_first_birth_without_an_inventory_is_sent_again_once_one_answers(
        mosquitto, node_exporter_sys):
    """The agent started while a reader hangs: its first birth's inventory overran, and the
    birth went out with no GPUs, no ports, no SKU, no boot and the expected GPUs lost, never
    sent again (the console judged a 4-GPU node against 8: a false drain) (a review). It
    says what the source knows, and is published again once an inventory answers."""
    gate = Gate()
    gate.shut.set()  # hung from the start
    source = hanging_source("ib", node_exporter_sys, gate)
    source.sku, source.gpus_expected = "ND_H100_v5", 4
    agent = NodeAgent(cluster=CLUSTER, node_id="gpu0001", url=mosquitto.url, source=source,
                      interval_s=1.0, keepalive=2, phase_s=0.0)
    stop = asyncio.Event()
    run = asyncio.create_task(agent.run(stop))
    try:
        async with Watcher(mosquitto.url) as w:
            await w.until(lambda s: node(s) is not None and node(s).birth is not None,
                          message="the first birth")
            first = node(w.state).birth
            assert first.sku == "ND_H100_v5" and first.gpus_expected == 4, first
            assert not first.ib_ports and "no inventory yet" in first.errors[0], first.errors
            assert agent._boot_id is None, "a stand-in's empty boot taken as the boot"
            gate.released.set()
            await w.until(lambda s: len(node(s).birth.ib_ports) == 3, timeout=10,
                          message="the birth again, with its inventory")
            again = node(w.state).birth
            assert again.boot_id and not any("no inventory" in e for e in again.errors)
            assert agent._boot_id == again.boot_id
    finally:
        stop.set()
        gate.released.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(run, 10)
