"""A real agent process whose HCA resets and comes back under another name, on a real
Mosquitto: the agent sends a new birth naming the port as it is now.

The kernel names an HCA that registers again (an HCA reset: devlink reload, a PCIe reset,
a driver rebind) with the lowest free index, so ``mlx5_3`` may come back as ``mlx5_8``. The
birth still named ``mlx5_3:1``, and the console failed the node for as long as the agent ran:
N7 ("reseat or replace the HCA") while the agent reported the port absent, then "port missing
from telemetry" (a real-node drill; docs/real-nodes.md)."""

import asyncio
import shutil
import time
import uuid
from pathlib import Path

import aiomqtt

from fleetdeck.console.ingest import Ingest
from fleetdeck.console.state import FleetState
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import Birth, Event
from fleetdeck.protocol.topics import Kind, topic_for
from tests.conftest import eventually, spawn, stop_process
from tests.real.test_real_sysfs_ib import make_port
from tests.test_agent_lifecycle import CLUSTER


async def test_an_hca_back_under_a_new_name_gets_a_new_birth(mosquitto, tmp_path: Path):
    root = tmp_path / "class" / "infiniband"
    for i in range(2):
        pci = tmp_path / "devices" / f"010{i}:00:00.0"
        pci.mkdir(parents=True)
        make_port(root, dev=f"mlx5_{i}")
        (root / f"mlx5_{i}" / "device").symlink_to(pci)
    births: list[Birth] = []

    async def listen(ready: asyncio.Event) -> None:
        async with aiomqtt.Client(mosquitto.url.host, mosquitto.url.port,
                                  identifier=f"births-{uuid.uuid4().hex[:6]}",
                                  protocol=aiomqtt.ProtocolVersion.V311) as c:
            await c.subscribe(topic_for(CLUSTER, Kind.BIRTH, "gpu0001"), qos=1)
            ready.set()
            async for m in c.messages:
                births.append(codec.decode(Birth, m.payload))

    ready = asyncio.Event()
    listener = asyncio.create_task(listen(ready))
    await asyncio.wait_for(ready.wait(), 5)
    proc = spawn("agent", "--broker", str(mosquitto.url), "--cluster", CLUSTER, "--node-id",
                 "gpu0001", "--source", "sysfs", "--sysfs-root", str(root),
                 "--interval", "0.5", log=tmp_path / "agent.log")
    try:
        await eventually(lambda: bool(births), 10, message="a birth")
        assert [p.dev for p in births[-1].ib_ports] == ["mlx5_0", "mlx5_1"]
        shutil.move(root / "mlx5_0", tmp_path / "away")
        await asyncio.sleep(1.5)
        shutil.move(tmp_path / "away", root / "mlx5_8")
        await eventually(lambda: [p.dev for p in births[-1].ib_ports] == ["mlx5_1", "mlx5_8"],
                         10, message="a birth naming mlx5_8")
    finally:
        listener.cancel()
        stop_process(proc)
    log = (tmp_path / "agent.log").read_text()
    assert "Traceback" not in log, log


async def test_two_hcas_back_under_each_others_names_get_a_new_birth(mosquitto, tmp_path: Path):
    """Two HCAs reset at once come back under each other's names: the birth names the same
    ports, but each name's netdev and GPU pairing is the other HCA's. A new birth, and an
    event per port naming its HCA now (a review)."""
    root = tmp_path / "class" / "infiniband"
    for i in range(2):
        pci = tmp_path / "devices" / f"010{i}:00:00.0"
        pci.mkdir(parents=True)
        make_port(root, dev=f"mlx5_{i}")
        (root / f"mlx5_{i}" / "device").symlink_to(pci)
    births: list[Birth] = []
    said: list[str] = []

    async def listen(ready: asyncio.Event) -> None:
        async with aiomqtt.Client(mosquitto.url.host, mosquitto.url.port,
                                  identifier=f"swaps-{uuid.uuid4().hex[:6]}",
                                  protocol=aiomqtt.ProtocolVersion.V311) as c:
            await c.subscribe(topic_for(CLUSTER, Kind.BIRTH, "gpu0001"), qos=1)
            await c.subscribe(topic_for(CLUSTER, Kind.EVENT, "gpu0001"), qos=1)
            ready.set()
            async for m in c.messages:
                if str(m.topic).endswith(topic_for(CLUSTER, Kind.BIRTH, "gpu0001")):
                    births.append(codec.decode(Birth, m.payload))
                else:
                    said.append(codec.decode(Event, m.payload).message)

    ready = asyncio.Event()
    listener = asyncio.create_task(listen(ready))
    await asyncio.wait_for(ready.wait(), 5)
    proc = spawn("agent", "--broker", str(mosquitto.url), "--cluster", CLUSTER, "--node-id",
                 "gpu0001", "--source", "sysfs", "--sysfs-root", str(root),
                 "--interval", "0.5", log=tmp_path / "agent.log")
    try:
        await eventually(lambda: bool(births), 10, message="a birth")
        await asyncio.sleep(1.0)  # a read or two of each under its first name
        had = len(births)
        shutil.move(root / "mlx5_0", tmp_path / "away")
        shutil.move(root / "mlx5_1", root / "mlx5_0")
        shutil.move(tmp_path / "away", root / "mlx5_1")
        await eventually(lambda: len(births) > had, 10, message="a new birth")
        await eventually(lambda: sum("now the HCA at" in m for m in said) == 2, 10,
                         message=f"an event per port: {said}")
        assert [p.dev for p in births[-1].ib_ports] == ["mlx5_0", "mlx5_1"]
    finally:
        listener.cancel()
        stop_process(proc)
    log = (tmp_path / "agent.log").read_text()
    assert "Traceback" not in log, log


async def test_the_console_never_fails_the_node_across_the_rename(mosquitto, tmp_path: Path):
    """The sample that first names the HCA anew goes out after the birth that names it so:
    sent before it, the console judged it against the old birth and read N1 "port missing
    from telemetry" (DRAIN) of mlx5_0:1 for one sample, a failed verdict, an incident and a
    timeline line (a review). The console here applies each message as it arrives, one a
    tick, the strictest a console can be."""
    root = tmp_path / "class" / "infiniband"
    for i in range(2):
        pci = tmp_path / "devices" / f"010{i}:00:00.0"
        pci.mkdir(parents=True)
        make_port(root, dev=f"mlx5_{i}")
        (root / f"mlx5_{i}" / "device").symlink_to(pci)
    ingest = Ingest(CLUSTER)
    state = FleetState(CLUSTER, ingest.malformed)
    judged: list[tuple[str, str, list[str]]] = []
    """After each message: its kind, the verdict and the findings."""

    async def console(ready: asyncio.Event) -> None:
        async with aiomqtt.Client(mosquitto.url.host, mosquitto.url.port,
                                  identifier=f"console-{uuid.uuid4().hex[:6]}",
                                  protocol=aiomqtt.ProtocolVersion.V311) as c:
            await c.subscribe(topic_for(CLUSTER, Kind.BIRTH, "gpu0001").rsplit("/", 1)[0]
                              + "/#", qos=1)
            ready.set()
            async for m in c.messages:
                assert isinstance(m.payload, bytes)
                ingest.handle(str(m.topic), m.payload, time.time())
                state.apply(ingest.take_batch(), time.time())
                st = state.nodes.get("gpu0001")
                if st is not None and st.judged:
                    judged.append((str(m.topic).rsplit("/", 1)[1], st.verdict.value,
                                   [str(f) for f in st.findings]))

    ready = asyncio.Event()
    listener = asyncio.create_task(console(ready))
    await asyncio.wait_for(ready.wait(), 5)
    proc = spawn("agent", "--broker", str(mosquitto.url), "--cluster", CLUSTER, "--node-id",
                 "gpu0001", "--source", "sysfs", "--sysfs-root", str(root),
                 "--interval", "0.2", log=tmp_path / "agent.log")
    try:
        await eventually(lambda: any(k == "telemetry" for k, _v, _f in judged), 10,
                         message="a sample judged")
        await asyncio.sleep(0.6)  # a few samples under the first names
        had = len(judged)
        # Atomic, as the kernel's unregister and register look to a reader 0.2 s apart: no
        # sample between sees the port gone (that one is a real N7 and fails the node).
        (root / "mlx5_0").rename(root / "mlx5_8")
        await eventually(lambda: sum(k == "telemetry" for k, _v, _f in judged[had:]) >= 4,
                         10, message="samples after the rename")
        st = state.nodes["gpu0001"]
        assert st.birth is not None and [p.dev for p in st.birth.ib_ports] == [
            "mlx5_1", "mlx5_8"]
    finally:
        listener.cancel()
        stop_process(proc)
    bad = [j for j in judged if j[1] == "failed" or any(f.startswith("N1") for f in j[2])]
    assert not bad, bad
    assert judged[-1][1] == "ok", judged[-1]
    log = (tmp_path / "agent.log").read_text()
    assert "Traceback" not in log, log
