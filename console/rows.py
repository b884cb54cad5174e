"""How a node reads in a table row: Slurm-style state, summaries. Pure text, no styling, so the
TUI, ``status`` and tests share one definition."""

from dataclasses import dataclass

from console.state import NodeState
from fleetdeck.protocol.messages import DrainState


def slurm_state(st: NodeState) -> str:
    """``idle``, ``alloc``, ``drng``, ``drain``, ``down`` with ``*`` for not responding (sinfo)."""
    if st.online is False:
        return "down*"
    busy = st.job_id is not None
    if st.drain.state is DrainState.DRAINING:
        base = "drng"
    elif st.drain.state is DrainState.DRAINED:
        base = "drain"
    else:
        base = "alloc" if busy else "idle"
    return base + ("*" if st.stale else "")


@dataclass(frozen=True, slots=True)
class NodeRow:
    node: str
    verdict: str
    state: str
    gpus: str
    util: str
    temp: str
    power: str
    ib: str
    job: str
    gaps: str
    age: str
    reasons: str


def node_row(st: NodeState, now: float) -> NodeRow:
    t = st.telemetry
    util = temp = power = "-"
    if t is not None and t.gpus:
        present = [g for g in t.gpus if g.present]
        utils = [g.util_pct for g in present if g.util_pct is not None]
        temps = [g.temp_c for g in present if g.temp_c is not None]
        watts = [g.power_w for g in present if g.power_w is not None]
        util = f"{sum(utils) / len(utils):3.0f}%" if utils else "-"
        temp = f"{max(temps):3.0f}°C" if temps else "-"
        power = f"{sum(watts) / 1000:4.1f}kW" if watts else "-"
    age = "-" if st.last_rx is None else f"{max(0.0, now - st.last_rx):.0f}s"
    return NodeRow(
        node=st.node_id,
        verdict=st.verdict.value,
        state=slurm_state(st),
        gpus=f"{st.gpus_present}/{st.gpus_expected}",
        util=util,
        temp=temp,
        power=power,
        ib=f"{st.ib_ports_up}/{st.ib_ports}",
        job=st.job_id or "",
        gaps=str(st.seq_gaps) if st.seq_gaps else "",
        age=age,
        reasons="; ".join(str(f) for f in st.all_findings[:2]),
    )
