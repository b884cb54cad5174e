"""``fleetdeck demo``: a private broker, a simulated fleet and the console, cleaned up on exit."""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from fleetdeck.broker import AMQTT, ManagedBroker


def run_demo(args: argparse.Namespace) -> int:
    broker = ManagedBroker(args.broker_kind)
    with broker:
        # amqtt hangs clients that connect concurrently (MQTT.md §2): serialise and space them.
        concurrency = "1" if broker.kind == AMQTT else "32"
        sim_cmd = [
            sys.executable, "-m", "fleetdeck.cli", "sim", "--broker", str(broker.url),
            "--cluster", args.cluster, "--nodes", str(args.nodes), "--interval",
            str(args.interval), "--seed", str(args.seed), "--connect-concurrency", concurrency,
            "--scenario", "demo",
        ]
        log = open(os.path.join(str(broker.workdir), "sim.log"), "ab")  # noqa: SIM115
        sim = subprocess.Popen(sim_cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                               start_new_session=True)
        try:
            if args.headless:
                from fleetdeck.console.cli.status import run_status

                time.sleep(args.headless)
                return run_status(broker.url, args.cluster, 2.0, as_json=False)
            from fleetdeck.console.tui.app import run_console

            return run_console(broker.url, args.cluster, broker_label=broker.label,
                               store_path=Path(str(broker.workdir)) / "demo.db",
                               operator=os.environ.get("USER", "demo"))
        finally:
            sim.terminate()
            try:
                sim.wait(timeout=10)
            except subprocess.TimeoutExpired:
                sim.kill()
            log.close()
