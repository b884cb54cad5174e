"""`fleetdeck sim`'s GC tuning (FleetOptions.tune_gc, set by the CLI and the capacity bench):
fewer collections, the fleet's state frozen once every agent is connected, and no freezing
after each collection (cycles made later stay collectable). In a child process: the test
process's own GC is left alone."""

import subprocess
import sys
import textwrap

from tests.conftest import REPO

SCRIPT = textwrap.dedent("""
    import asyncio, gc, json, sys
    from fleetdeck.agents.fleet import Fleet, FleetOptions
    from fleetdeck.brokerurl import parse_broker_url

    async def main():
        before = gc.get_threshold()
        fleet = Fleet(parse_broker_url(sys.argv[1]),
                      FleetOptions(cluster="gct", nodes=3, interval_s=0.2, tune_gc={tune}))
        stop = asyncio.Event()
        runner = asyncio.create_task(fleet.run(stop))
        await fleet.wait_connected(20)
        await asyncio.sleep(0.3)
        out = dict(before=before[0], threshold=gc.get_threshold()[0],
                   frozen=gc.get_freeze_count(), callbacks=len(gc.callbacks))
        stop.set()
        await runner
        print(json.dumps(out))

    asyncio.run(main())
""")


def run(url: str, tune: bool) -> dict:
    import json

    res = subprocess.run([sys.executable, "-c", SCRIPT.format(tune=tune), url], cwd=REPO,
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_tuned_fleet_freezes_its_state_and_collects_less(mosquitto):
    tuned = run(str(mosquitto.url), True)
    assert tuned["threshold"] == 50_000 > tuned["before"]
    assert tuned["frozen"] > 10_000  # modules, the world, the agents and their sessions
    assert tuned["callbacks"] == 0  # no freeze after every collection (the console's way)
    plain = run(str(mosquitto.url), False)
    assert plain["threshold"] == plain["before"] and plain["frozen"] == 0


def test_the_cli_and_the_bench_tune_the_fleet_they_run():
    cli = (REPO / "fleetdeck" / "cli.py").read_text()
    bench = (REPO / "bench" / "sim_capacity.py").read_text()
    assert "tune_gc=True" in cli and "tune_gc=True" in bench
