"""``fleetdeck report``: job interruptions by cause, GPU-hours lost since their checkpoints,
and the effective training time ratio, from the store (console/interruptions.py)."""

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from fleetdeck.console.audit import iso
from fleetdeck.console.cli.history import (
    EVENTS_NARROW,
    _check,
    _open,
    nothing_found,
    parse_since,
    print_narrow,
    table_console,
    tell_yesterday,
)
from fleetdeck.console.interruptions import CAUSES, cause_label, report
from fleetdeck.hostlist import compress


def run_report(db: Path, since: str, as_json: bool, cluster: str | None = None) -> int:
    now = time.time()
    since_ts = parse_since(since, now)
    written = _check(db)

    async def main() -> tuple[list[dict[str, Any]], float]:
        store = await _open(db, cluster)
        try:
            return await store.interruptions(since_ts), await store.job_gpu_hours(since_ts)
        finally:
            await store.close()

    rows, gpu_hours = asyncio.run(main())
    tell_yesterday("report", since, since_ts, now)
    if not rows and not gpu_hours:
        nothing_found("report", db, since_ts, written)
    out: dict[str, Any] = {"since": since_ts, **report(rows, gpu_hours), "list": rows}
    if as_json:
        print(json.dumps(out, indent=2))
        return 0
    console = table_console()
    ettr = out["effective_training_time_ratio"]
    console.print(f"[b]{out['interruptions']}[/] job interruptions since {iso(since_ts)}; "
                  f"{out['lost_gpu_hours']:.2f} GPU-h lost since their checkpoints of "
                  f"{out['job_gpu_hours']:.1f} GPU-h held by running jobs; effective training "
                  f"time ratio {'-' if ettr is None else f'{ettr:.1%}'}")
    table = Table(box=None, pad_edge=False)
    for col in ("CAUSE", "COUNT", "LOST GPU-H"):
        table.add_column(col)
    for cause in CAUSES:
        row = out["by_cause"][cause]
        table.add_row(cause_label(cause), str(int(row["count"])), f"{row['lost_gpu_hours']:.2f}")
    console.print(table)
    if rows and console.width < EVENTS_NARROW:
        # As `events` on a narrow terminal: a cut time of day and a detail wrapped 7 lines
        # tall in a 13-character column (a newcomer's run).
        console.print("interruptions", highlight=False)
        for r in rows[-20:]:
            print_narrow(console, (iso(r["ts"]), f"job {r['job_id']}", cause_label(r["cause"]),
                                   compress(r["nodes"]) if r["nodes"] else "",
                                   f"{r['gpus']} GPUs", f"{r['lost_gpu_hours']:.2f} GPU-h"),
                         r["detail"])
    elif rows:
        last = Table(box=None, pad_edge=False, title="interruptions", title_justify="left")
        last.add_column("WHEN", no_wrap=True)
        for col in ("JOB", "CAUSE", "NODES", "GPUS", "LOST GPU-H", "DETAIL"):
            last.add_column(col)
        for r in rows[-20:]:
            # The whole host list, as the narrow table prints it: the first four names alone
            # hid two of a switch outage's six nodes (a 3 a.m. drive).
            last.add_row(iso(r["ts"]), r["job_id"], cause_label(r["cause"]),
                         compress(r["nodes"]) if r["nodes"] else "",
                         str(r["gpus"]), f"{r['lost_gpu_hours']:.2f}", escape(r["detail"]))
        console.print(last)
    return 0
