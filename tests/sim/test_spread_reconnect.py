"""`fleetdeck sim --procs 2`: an input the lead process stamps while the other process's
connection is away (it makes it again: a clean session, subscribed again) is still applied
there.

The lead sent each input once, QoS 1 and not retained, on ``…/sim/ctl``: stamped while the
second process's client was reconnecting, it went to nobody there, and that copy of the
cluster never had it (an ``agent_death`` of one of its nodes was answered "injected" and the
node stayed online). Now the lead keeps a retained window of its last inputs there
(agents/fleet.py ``Fleet._stamp``), which the broker hands over on subscribing again.

The test takes the second process's connection from it: a client of its client id connects,
and the broker closes the older session (MQTT's session takeover), as a broker that restarts
or a network that drops the connection would."""

import asyncio
import time
import uuid

from fleetdeck.agents.fleet import inject, shard_of
from fleetdeck.broker import ManagedBroker
from fleetdeck.brokerurl import BrokerURL, make_client
from tests.conftest import spawn, stop_process, subscribers
from tests.sim.test_sim_procs import Seen, watch

NODES = [f"gpu{i:04d}" for i in range(1, 9)]


def ctl_subscribes(broker: ManagedBroker, client_id: str) -> int:
    """How many times ``client_id`` subscribed to a cluster's ``…/sim/ctl`` on a
    ``telling_mosquitto`` (a '<time>: <client id> <qos> <filter>' line each)."""
    rows = (line.split() for line in broker.log_path.read_text(errors="replace").splitlines())
    return sum(1 for row in rows if len(row) == 4 and row[1] == client_id
               and row[3].endswith("/sim/ctl"))


async def inject_while_cut_off(url: BrokerURL, cluster: str, node: str) -> tuple[str, bool]:
    """Inject ``agent_death`` of ``node`` while the second process's scheduler client is cut
    off: (the answer's detail, whether it stayed cut off until the answer came)."""
    async with make_client(url, f"fd-{cluster}-sim1") as impostor:
        # Its message stream ends when the second process takes the session back (it
        # reconnects by itself after a back-off of half a second or more).
        held = asyncio.create_task(anext(aiter(impostor.messages)))
        ok, detail = await inject(url, cluster, {"fault": "agent_death", "node": node},
                                  timeout=60)
        assert ok, detail
        # One outbox, in order: the lead's window went to the broker before the answer, so
        # while this client held the session the second process's client cannot have had it.
        kept = not held.done()
        held.cancel()
        await asyncio.gather(held, return_exceptions=True)
    return detail, kept


def test_an_input_stamped_while_a_process_reconnects_is_applied_there(telling_mosquitto,
                                                                      tmp_path):
    url = telling_mosquitto.url
    cluster = f"recon{uuid.uuid4().hex[:4]}"
    log = tmp_path / "sim.log"
    sim = spawn("--log-level", "info", "sim", "--broker", str(url), "--cluster", cluster,
                "--nodes", str(len(NODES)), "--procs", "2", "--interval", "0.1",
                "--seed", "3", log=log)
    try:
        seen = Seen()
        asyncio.run(watch(url, cluster, seen, lambda s: s.births >= set(NODES) and all(
            s.telemetry.get(n, 0) >= 2 for n in NODES), timeout=90))
        deadline = time.monotonic() + 60
        while subscribers(telling_mosquitto, f"fd-{cluster}-s") < 2:  # sched and sim1
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.1)
        worker = f"fd-{cluster}-sim1"
        assert ctl_subscribes(telling_mosquitto, worker) == 1
        theirs = [n for n in NODES if shard_of(NODES.index(n), len(NODES), 2) == 1]
        # Each try takes the session once; a try the second process won back before the
        # answer came proves nothing (it may have had the input live): the next node then.
        for victim in theirs:
            detail, kept = asyncio.run(inject_while_cut_off(url, cluster, victim))
            if kept:
                break
        assert kept, "the second process took its session back before every answer"
        assert detail == f"agent_death node={victim}"
        # Unfixed: the second process never applied it, and its node stayed online.
        final = Seen()
        try:
            asyncio.run(watch(url, cluster, final, lambda s: victim in s.status
                              and not s.status[victim].online, timeout=60))
        except TimeoutError:
            said = log.read_text(errors="replace")
            raise AssertionError(f"{victim} still online: {said}") from None
        # It came back by itself, subscribed again, and the window came with that.
        assert ctl_subscribes(telling_mosquitto, worker) >= 2
        assert "never reached this one" not in log.read_text(errors="replace")
    finally:
        code = stop_process(sim, timeout=40)
    said = log.read_text(errors="replace")
    assert code == 0, said
    assert "Traceback" not in said, said

