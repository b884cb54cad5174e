"""Recent per-GPU history for sparklines: a bounded ring buffer per node, a few bytes per sample.

At 4,096 nodes a tuple of floats per GPU per sample would cost ~100 MB; one ``bytes`` of
3 x 8 small integers per sample costs ~60 B, so 60 samples of the whole fleet stay near 15 MB.
Values are quantised for drawing, not for arithmetic: util in %, temperature in °C, power in
units of 4 W. ``MISSING`` marks "not reported".
"""

from collections import deque
from collections.abc import Iterable

from fleetdeck.protocol.fast import Telemetry

SAMPLES = 60
MISSING = 255
METRICS = ("util", "temp", "power")
POWER_STEP_W = 4


def _q(value: float | None, step: float = 1.0) -> int:
    if value is None:
        return MISSING
    return max(0, min(254, round(value / step)))


class RecentHistory:
    """``node -> deque[bytes]``; each sample holds util[n], temp[n], power[n] for n GPUs."""

    def __init__(self, samples: int = SAMPLES) -> None:
        self.samples = samples
        self._data: dict[str, deque[bytes]] = {}
        self._gpus: dict[str, int] = {}

    def record(self, node: str, t: Telemetry) -> None:
        gpus = sorted(t.gpus, key=lambda g: g.index)
        n = len(gpus)
        util = [_q(g.util_pct) if g.present else MISSING for g in gpus]
        temp = [_q(g.temp_c) if g.present else MISSING for g in gpus]
        power = [_q(g.power_w, POWER_STEP_W) if g.present else MISSING for g in gpus]
        ring = self._data.get(node)
        if ring is None or self._gpus.get(node) != n:
            ring = self._data[node] = deque(maxlen=self.samples)
            self._gpus[node] = n
        ring.append(bytes(util + temp + power))

    def record_many(self, items: Iterable[tuple[str, Telemetry]]) -> None:
        for node, t in items:
            self.record(node, t)

    def series(self, node: str, gpu_pos: int, metric: str) -> list[float | None]:
        """Values of one GPU (position in index order) and metric, oldest first."""
        ring = self._data.get(node)
        n = self._gpus.get(node, 0)
        if ring is None or not 0 <= gpu_pos < n:
            return []
        offset = METRICS.index(metric) * n + gpu_pos
        scale = POWER_STEP_W if metric == "power" else 1
        return [None if s[offset] == MISSING else float(s[offset] * scale) for s in ring]

    def __len__(self) -> int:
        return len(self._data)

    def forget(self, node: str) -> None:
        self._data.pop(node, None)
        self._gpus.pop(node, None)


SPARK = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float | None], lo: float, hi: float, width: int) -> str:
    """The last ``width`` values as block characters scaled to [lo, hi]; gaps as spaces."""
    vals = values[-width:]
    span = max(1e-9, hi - lo)
    out = []
    for v in vals:
        if v is None:
            out.append(" ")
        else:
            k = int((min(hi, max(lo, v)) - lo) / span * (len(SPARK) - 1) + 0.5)
            out.append(SPARK[k])
    return "".join(out).rjust(width)
