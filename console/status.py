"""``fleetdeck status``: connect, collect retained + live state for a while, print, exit."""

import asyncio
import contextlib
import json
import os
import time
from typing import Any

import aiomqtt
from rich.console import Console
from rich.table import Table

from console.ingest import Ingest
from console.live import LiveFeed
from console.state import FleetState
from console.summary import fleet_summary
from fleetdeck.brokerurl import BrokerURL, describe_mqtt_error
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


def render(state: FleetState, url: BrokerURL, console: Console) -> None:
    t = state.totals()
    verdicts = "  ".join(
        f"[{VERDICT_STYLE[v]}]{v} {n}[/]" for v, n in t.by_verdict.items() if n
    ) or "no nodes"
    console.print(
        f"[b]{state.cluster}[/] @ {url}: {t.nodes} nodes  {verdicts}  "
        f"GPUs {t.gpus_present}/{t.gpus}  IB up {t.ib_ports_up}/{t.ib_ports}  "
        f"drained {t.drained} draining {t.draining}  malformed {t.malformed}"
    )
    table = Table(box=None, pad_edge=False)
    for col in ("NODE", "VERDICT", "STATE", "GPUS", "IB UP", "REASONS"):
        table.add_column(col)
    for st in state.worst_first():
        state_text = "online" if st.online else "offline"
        if st.drain.state.value != "none":
            state_text += f"+{st.drain.state.value}"
        table.add_row(
            st.node_id,
            f"[{VERDICT_STYLE[st.verdict.value]}]{st.verdict.value}[/]",
            state_text,
            f"{st.gpus_present}/{st.gpus_expected}",
            f"{st.ib_ports_up}/{st.ib_ports}",
            "; ".join(str(f) for f in st.all_findings[:3]),
        )
    console.print(table)


def run_status(url: BrokerURL, cluster: str, wait_s: float, as_json: bool) -> int:
    tune_gc()
    state = asyncio.run(collect(url, cluster, wait_s))
    if as_json:
        out: dict[str, Any] = fleet_summary(state, time.time(), broker=str(url),
                                            collected_s=wait_s)
        print(json.dumps(out, indent=2))
    else:
        render(state, url, Console())
    return 0
