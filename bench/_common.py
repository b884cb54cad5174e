"""What every benchmark shares: loud failure, /proc readings, percentiles, and result rows.

A benchmark that measured nothing must never print a figure: ``fail`` prints one line starting
``BENCH FAILED:`` on stderr and exits 1; ``BenchFailure`` is the same as an exception, for code
that wants to clean up first (``main_guard`` turns it into the line and the exit status).

Result rows (``Row``) are what ``make bench`` tabulates (bench/run_all.py): one per target of the
issue, with the measured figure, its unit, the node count it was measured at and whether the
target is met. ``met`` is None when the figure was not measured at the target's size: a row is
never "met" by extrapolation.
"""

import json
import math
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NoReturn

FAILED = "BENCH FAILED:"
CLK_TCK = os.sysconf("SC_CLK_TCK")


class BenchFailure(Exception):
    """The subject published or received nothing, or died: no figure may be printed."""


def fail(why: str) -> NoReturn:
    print(f"{FAILED} {why}", file=sys.stderr, flush=True)
    sys.exit(1)


def main_guard(main: Callable[[], int | None]) -> NoReturn:
    """Run a benchmark's main; a BenchFailure becomes the FAILED line and exit status 1."""
    try:
        rc = main()
    except BenchFailure as err:
        fail(str(err))
    sys.exit(rc or 0)


def require(ok: object, why: str) -> None:
    if not ok:
        raise BenchFailure(why)


# --- /proc -----------------------------------------------------------------------------------


def cpu_s(pid: int | str = "self") -> float:
    """User + system CPU seconds of one process (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def runqueue_s(pid: int | str = "self") -> float:
    """Seconds the process spent runnable but waiting for a CPU (/proc/PID/schedstat): how much
    the other processes on the machine held it back."""
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[1]) / 1e9


def rss_mib(pid: int | str = "self", field: str = "VmRSS") -> float:
    """Resident set size (``VmRSS``) or its peak (``VmHWM``) in MiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return math.nan


# --- statistics ------------------------------------------------------------------------------


def pct(values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank; NaN for no values."""
    if not values:
        return math.nan
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


# --- result rows -----------------------------------------------------------------------------


@dataclass
class Row:
    target: str
    """The issue's target, in its words."""
    figure: str
    """The measured figure as printed (with the context a reader needs)."""
    unit: str
    met: bool | None
    """True/False when measured at the target's size; None: not measured at the target's size
    (the figure at a smaller size is in ``figure`` and ``nodes``)."""
    nodes: int | None = None
    """The fleet size this row was measured at."""
    value: float | None = None
    """The headline number alone (for machines reading the JSON)."""
    source: str = ""
    """The benchmark that measured it."""

    @property
    def status(self) -> str:
        if self.met is None:
            return "not measured at target size"
        return "met" if self.met else "NOT MET"


def judge(ok: bool, nodes: int, target_nodes: int | None) -> bool | None:
    """met / not met, or None when measured below the target's size and the figure would pass
    there (a pass at a smaller fleet says nothing about the target); a figure that already
    fails at a smaller fleet is not met."""
    if target_nodes is not None and nodes < target_nodes:
        return False if not ok else None
    return ok


def write_rows(path: str | Path | None, rows: Iterable[Row]) -> None:
    rows = [Row(**{**asdict(r), "value": finite(r.value)}) for r in rows]
    if path:
        Path(path).write_text(json.dumps([asdict(r) for r in rows], indent=1) + "\n")


def read_rows(path: str | Path) -> list[Row]:
    return [Row(**r) for r in json.loads(Path(path).read_text())]


def table(rows: Sequence[Row]) -> str:
    head = ("target", "measured", "unit", "N", "status")
    body = [(r.target, r.figure, r.unit, "" if r.nodes is None else f"{r.nodes:,}", r.status)
            for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h)
              for i, h in enumerate(head)]
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)) + " |",
             "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += ["| " + " | ".join(c.ljust(w) for c, w in zip(b, widths, strict=True)) + " |"
              for b in body]
    return "\n".join(lines)


def ms(seconds: float) -> str:
    """Seconds as whole ms; 'never' for what did not happen (infinitely late)."""
    if math.isnan(seconds):
        return "n/a"
    return "never" if math.isinf(seconds) else f"{seconds * 1000:,.0f}"


def finite(x: float | None) -> float | None:
    """A row's value, or None where it is NaN or infinite (JSON has neither)."""
    return x if x is not None and math.isfinite(x) else None


def as_json(obj: Any) -> str:
    return json.dumps(obj, default=lambda o: None if isinstance(o, float) and math.isnan(o)
                      else str(o))
