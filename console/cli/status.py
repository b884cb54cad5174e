"""``fleetdeck status``: connect, collect retained + live state for a while, print, exit."""

import asyncio
import contextlib
import json
import os
import time
from typing import Any

import aiomqtt
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from fleetdeck.brokerurl import BrokerURL, describe_mqtt_error
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.live import LiveFeed
from fleetdeck.console.state import FleetState
from fleetdeck.console.summary import fleet_summary
from fleetdeck.errors import UserError
from fleetdeck.runtime import tune_gc

VERDICT_STYLE = {
    "ok": "green", "degraded": "yellow", "failed": "bold red", "stale": "dim", "offline": "red",
}


async def collect(url: BrokerURL, cluster: str, wait_s: float) -> FleetState:
    ingest = Ingest(cluster)
    feed = LiveFeed(url, ingest, client_id=f"fd-status-{os.getpid()}-{int(time.time())}")
    stop = asyncio.Event()
    task = asyncio.create_task(feed.run(stop, retry=False))
    try:
        await asyncio.wait_for(asyncio.shield(task), wait_s)
    except TimeoutError:
        pass
    except aiomqtt.MqttError as err:
        raise UserError(describe_mqtt_error(url, err)) from None
    stop.set()
    with contextlib.suppress(aiomqtt.MqttError):
        await task
    state = FleetState(cluster, ingest.malformed)
    state.apply(ingest.take_batch(), time.time())
    return state


VERDICT_RANK = {"offline": 0, "failed": 1, "stale": 2, "degraded": 3, "ok": 4}


def render_summary(summary: dict[str, Any], console: Console) -> None:
    """The human table of a ``fleet_summary`` (status, replay): worst nodes first."""
    t = summary["totals"]
    verdicts = "  ".join(
        f"[{VERDICT_STYLE[v]}]{v} {n}[/]" for v, n in t["by_verdict"].items() if n
    ) or "no nodes"
    where = escape(str(summary.get("broker") or summary.get("source") or ""))
    console.print(
        f"[b]{escape(summary['cluster'])}[/] @ {where}: {t['nodes']} nodes  {verdicts}  "
        f"GPUs {t['gpus_present']}/{t['gpus']}  IB up {t['ib_ports_up']}/{t['ib_ports']}  "
        f"drained {t['drained']} draining {t['draining']}  malformed {t['malformed']}"
    )
    table = Table(box=None, pad_edge=False)
    for col in ("NODE", "VERDICT", "STATE", "GPUS", "IB UP", "JOB", "REASONS"):
        table.add_column(col)
    nodes = sorted(summary["nodes"], key=lambda n: (VERDICT_RANK[n["verdict"]], n["id"]))
    for n in nodes:
        state_text = "online" if n["online"] else "offline"
        if n["drain"] != "none":
            state_text += f"+{n['drain']}"
        table.add_row(
            n["id"],
            f"[{VERDICT_STYLE[n['verdict']]}]{n['verdict']}[/]",
            state_text,
            f"{n['gpus']}/{n['gpus_expected']}",
            f"{n['ib_ports_up']}/{n['ib_ports']}",
            n["job"] or "",
            escape("; ".join(n["findings"][:3])),
        )
    console.print(table)


def run_status(url: BrokerURL, cluster: str, wait_s: float, as_json: bool) -> int:
    tune_gc()
    state = asyncio.run(collect(url, cluster, wait_s))
    out: dict[str, Any] = fleet_summary(state, time.time(), broker=str(url), collected_s=wait_s)
    if as_json:
        print(json.dumps(out, indent=2))
    else:
        render_summary(out, Console())
    return 0
