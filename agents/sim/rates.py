"""Fault rate tables: failures per node-day by cause, turned into a seeded Poisson fault schedule.

A rate table is a scenario file (docs/scenarios.md) with one more table, ``[rates]``: for each
cause, how many failures a node has per day, which fault kind it is (the vocabulary of
:mod:`agents.sim.spec`) and how long the node stays out before it is repaired. From it,
:func:`schedule` draws the faults of a run — exponential gaps per cause, a uniformly chosen node
each time, a repair after the cause's repair time — as plain timeline actions that
:class:`agents.sim.world.SimWorld` runs like any scenario's. The same seed gives the same faults.

:func:`expected` says how many job interruptions a console should count per cause class for a
given number of busy node-days: what ``fleetdeck report`` is checked against
(tests/sim/test_fault_rates.py, docs/scenarios.md "Fault rate tables").
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

from fleetdeck.agents.sim.node import DRAIN_XIDS, XID_KINDS, stable_seed
from fleetdeck.agents.sim.scenario import Scenario, parse_scenario, read_toml
from fleetdeck.agents.sim.spec import (
    KINDS,
    NODE_LESS,
    Action,
    SpecError,
    Value,
    parse_action,
    parse_duration,
    xid_codes,
)

DAY_S = 86400.0
MAX_RATE = DAY_S
"""More than one failure a second per node is no failure rate (a demo may want one every few
seconds across the fleet, which is thousands per node-day)."""

CLASSES = ("gpu", "hbm_ecc", "network", "host", "software")
"""The interruption classes of the console's accounting (console/interruptions.py CAUSES, less
'operator': a table does not drain nodes)."""

_ECC_CLASS_XIDS = frozenset({48, 64, 95})
"""Drain-class XIDs the console files under HBM/ECC rather than GPU (console/interruptions.py
``_ECC_XIDS`` ∩ the drain codes: a warn-only finding does not explain an interruption)."""

_RANDOM_UNIT = {"gpu": 8, "port": 8}
"""Parameters drawn per fault (uniformly) unless the cause fixes them: which GPU, which HCA."""

_NO_TARGET = frozenset({"node", "job", "index", "leaf"})


@dataclass(frozen=True)
class Builtin:
    fault: str
    params: dict[str, Any]
    repair: str | None
    doc: str


BUILTIN_CAUSES: dict[str, Builtin] = {
    "gpu_xid79": Builtin("xid79", {}, "6h", "GPU fell off the bus (XID 79): NF, requeue"),
    "gpu_gsp": Builtin("xid", {"code": 119, "then": [45]}, "2h",
                       "GSP RPC timeout (XID 119, then 45): the rank dies (F), GPU reset"),
    "gpu_nvlink": Builtin("nvlink", {}, "4h", "NVLink links down (XID 74 on two GPUs): the "
                          "job slows (a straggler), the node takes no new work; no interruption"),
    "hbm_dbe": Builtin("ecc_dbe", {}, "2h",
                       "double-bit ECC error (XID 48, 63): the rank dies (F), reset"),
    "hbm_uncontained": Builtin("xid", {"code": 95, "then": [63, 45]}, "2h",
                               "uncontained ECC error (XID 95, 63, 45): F, reset"),
    "hbm_remap_failure": Builtin("ecc_dbe", {"remap_failure": True}, "24h",
                                 "DBE whose row remap failed (XID 48, 64): F, replace the GPU"),
    "ib_link_down": Builtin("link_down", {}, "4h",
                            "an HCA link down (cable, optic): stall, NF after hang_timeout"),
    "ib_flap": Builtin("ib_flap", {}, None,
                       "a link flapping 5 times: short stalls, no interruption"),
    "node_power_loss": Builtin("node_death", {}, "30m",
                               "the node dies (PSU, kernel panic): stall, NF, requeue"),
    "agent_crash": Builtin("agent_death", {}, "10m",
                           "the agent dies, ranks keep running: no interruption"),
    "app_crash": Builtin("xid", {"code": 13, "then": [43, 45]}, None,
                         "the application's own bug (XID 13, 43, 45): F, node fine"),
    "gpu_thermal": Builtin("thermal", {"duration": "2h"}, None,
                           "a GPU cooling fault for 2 h: a straggler, no interruption"),
}
"""Causes a table may name without saying what they are (docs/scenarios.md). A node with a
drain-class XID comes back no sooner than 2 h: the console keeps such an XID that long
(docs/architecture.md), and a node back sooner would carry a finding that the next interruption
of its new job is blamed on."""

_CAUSE_KEYS = frozenset({"per_node_day", "fault", "repair", "counts_as"})


class RatesError(SpecError):
    """A rate table that cannot be understood (one plain sentence)."""


@dataclass(frozen=True)
class Cause:
    name: str
    per_node_day: float
    fault: str
    params: dict[str, Value | None]
    """Validated parameters of the fault kind, without a target."""
    drawn: tuple[str, ...]
    """Parameters drawn per fault (``gpu``, ``port``) because the table does not fix them."""
    repair_s: float | None
    """The node is repaired (or, after ``agent_death``, its agent restarted) this long after the
    fault; None: never (the fault ends by itself, or is harmless to later work)."""
    counts_as: str | None
    """The interruption class a console should give a job this fault interrupts; None: the
    fault does not interrupt a job."""


@dataclass
class RateTable:
    name: str
    causes: list[Cause]
    scenario: Scenario
    """What else the file holds: [fleet], [[job]], [[fault]] as in any scenario."""

    def fleet_rate_per_day(self, nodes: int) -> float:
        return sum(c.per_node_day for c in self.causes) * nodes


@dataclass(frozen=True)
class Fault:
    """One drawn fault: its cause and the action that applies it."""

    cause: Cause
    action: Action


@dataclass
class Schedule:
    faults: list[Fault] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    """Faults and their follow-ups (repairs, agent restarts), in time order."""


def counts_as(fault: str, params: dict[str, Value | None]) -> str | None:
    """The interruption class the console gives a job this fault kills, from the rules it
    applies (console/interruptions.py): None when the fault does not interrupt work."""
    # ``nvlink`` takes links down and slows the job (comm x 2.5 on the node) without killing a
    # rank (docs/scenarios.md): like thermal, it interrupts nothing; ``xid code=74`` does.
    if fault == "xid79":
        return "gpu"
    if fault == "ecc_dbe":
        return "hbm_ecc"
    if fault in ("link_down", "leaf_switch"):
        return "network"
    if fault == "node_death":
        return "host"
    if fault == "xid":
        codes = xid_codes(Action(0, "xid", params))
        effects = {XID_KINDS[c].effect for c in codes if c in XID_KINDS}
        if not effects & {"app", "fatal", "bus"}:
            return None
        if "bus" in effects:
            return "gpu"
        if any(c in DRAIN_XIDS for c in codes):
            return "hbm_ecc" if any(c in _ECC_CLASS_XIDS for c in codes) else "gpu"
        # The rank died, the node looks healthy: the console can only call it software.
        return "software"
    return None


def _cause(name: str, raw: object) -> Cause:
    what = f"[rates] {name}"
    if isinstance(raw, dict):
        entry = dict(raw)
    elif isinstance(raw, int | float) and not isinstance(raw, bool):
        entry = {"per_node_day": raw}
    else:
        raise RatesError(f"{what} must be a number of failures per node-day or a table like "
                         f"{{ per_node_day = 0.001, fault = \"xid79\" }}, not {raw!r}")
    builtin = BUILTIN_CAUSES.get(name)
    fault = entry.pop("fault", None)
    if fault is None:
        if builtin is None:
            known = ", ".join(sorted(BUILTIN_CAUSES))
            raise RatesError(f"{what}: unknown cause (built in: {known}; or give fault = "
                             "\"<kind>\" to define your own)")
        fault = builtin.fault
        entry = {**builtin.params, **({"repair": builtin.repair} if builtin.repair else {}),
                 **entry}
    if not isinstance(fault, str) or fault not in KINDS:
        raise RatesError(f"{what}: unknown fault kind {fault!r} (choose from: "
                         f"{', '.join(sorted(k for k in KINDS if k not in NODE_LESS))})")
    if fault in NODE_LESS or fault in ("repair", "agent_restart"):
        raise RatesError(f"{what}: '{fault}' is not a failure")
    rate = entry.pop("per_node_day", None)
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not math.isfinite(rate):
        raise RatesError(f"{what}: per_node_day must be a number of failures per node-day, "
                         f"not {rate!r}")
    if rate < 0:
        raise RatesError(f"{what}: a rate cannot be negative ({rate:g} per node-day)")
    if rate > MAX_RATE:
        raise RatesError(f"{what}: {rate:g} failures per node-day is more than {MAX_RATE:g} "
                         "(rates are per node and per day)")
    repair_raw = entry.pop("repair", None)
    repair_s = None if repair_raw is None else parse_duration(repair_raw, f"{what}: repair")
    klass_raw = entry.pop("counts_as", None)
    if klass_raw is not None and klass_raw not in (*CLASSES, "none"):
        raise RatesError(f"{what}: counts_as must be one of {', '.join(CLASSES)} or none, not "
                         f"{klass_raw!r}")
    targets = sorted(set(entry) & _NO_TARGET)
    if targets:
        raise RatesError(f"{what}: {', '.join(targets)} cannot be set: each fault hits a node "
                         "drawn at random")
    try:
        # A stand-in node: the kind's own checks (ranges, required codes) run here, once.
        action = parse_action({**entry, "fault": fault, "at": 0, "node": "-"})
    except SpecError as err:
        raise RatesError(f"{what}: {err}") from None
    params = {k: v for k, v in action.params.items() if k not in _NO_TARGET}
    drawn = tuple(k for k in _RANDOM_UNIT if k in KINDS[fault] and k not in entry)
    if klass_raw is None:
        klass = counts_as(fault, params)
    else:
        klass = None if klass_raw == "none" else str(klass_raw)
    return Cause(name, float(rate), fault, params, drawn, repair_s, klass)


def parse_rates(data: dict[str, Any], default_name: str = "rates") -> RateTable:
    """A parsed TOML document -> :class:`RateTable` (raises :class:`RatesError`)."""
    rest = dict(data)
    rates = rest.pop("rates", None)
    if rates is None:
        raise RatesError("no [rates] table (failures per node-day by cause, e.g. "
                         "[rates] gpu_xid79 = 0.002)")
    if not isinstance(rates, dict):
        raise RatesError("[rates] must be a table of cause = failures per node-day")
    if not rates:
        raise RatesError("[rates] is empty: name at least one cause")
    try:
        scenario = parse_scenario(rest, default_name=default_name)
    except SpecError as err:
        raise RatesError(str(err)) from None
    try:
        causes = [_cause(str(name), raw) for name, raw in rates.items()]
    except RatesError:
        raise
    except SpecError as err:  # a duration's own sentence, already naming the entry
        raise RatesError(str(err)) from None
    return RateTable(scenario.name, causes, scenario)


def load_rates(ref: str) -> RateTable:
    """A built-in table by name (``rates-week``) or a path."""
    try:
        path, data = read_toml(ref, "rate table", "rates-*.toml")
    except SpecError as err:
        raise RatesError(str(err)) from None
    try:
        return parse_rates(data, default_name=path.stem)
    except SpecError as err:
        raise RatesError(f"rate table '{path}': {err}") from None


def schedule(table: RateTable, nodes: list[str], *, seed: int, until_s: float,
             start_s: float = 0.0) -> Schedule:
    """The faults of ``[start_s, until_s)`` on ``nodes``: per cause a Poisson process of rate
    ``per_node_day x len(nodes)`` per day, each fault on a node drawn uniformly, followed by
    its repair. Each cause has its own random stream (seed, cause name), so adding a cause to a
    table does not move the faults of the others."""
    out = Schedule()
    if not nodes:
        return out
    for cause in table.causes:
        if cause.per_node_day <= 0:
            continue
        rng = random.Random(stable_seed(seed, "fault-rates", cause.name))
        per_s = cause.per_node_day * len(nodes) / DAY_S
        t = start_s
        while True:
            t += rng.expovariate(per_s)
            if t >= until_s:
                break
            node = nodes[rng.randrange(len(nodes))]
            params = dict(cause.params)
            for key in cause.drawn:
                params[key] = rng.randrange(_RANDOM_UNIT[key])
            action = Action(t, cause.fault, {**params, "node": node})
            out.faults.append(Fault(cause, action))
            out.actions.append(action)
            if cause.repair_s is not None:
                if cause.fault == "agent_death":
                    # Back if still dead: a repair in between brought it back already, and a
                    # restart of a live agent is one more offline blip (a review).
                    follow = Action(t + cause.repair_s, "agent_restart",
                                    {"node": node, "only_dead": True})
                else:
                    follow = Action(t + cause.repair_s, "repair", {"node": node})
                out.actions.append(follow)
    out.faults.sort(key=lambda f: f.action.at)
    out.actions.sort(key=lambda a: a.at)
    return out


def expected(table: RateTable, busy_node_days: float) -> dict[str, float]:
    """Interruptions a console should count per class when the jobs held ``busy_node_days``
    (a fault on an idle node interrupts nothing; one on a busy node interrupts its job)."""
    out = dict.fromkeys(CLASSES, 0.0)
    for c in table.causes:
        if c.counts_as is not None:
            out[c.counts_as] += c.per_node_day * busy_node_days
    return out


def _span(seconds: float) -> str:
    for unit, size in (("d", DAY_S), ("h", 3600.0), ("m", 60.0)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def describe(table: RateTable, nodes: int, days: float) -> list[str]:
    """One line per cause: rate, kind, repair, expected faults over ``nodes x days``."""
    lines = []
    for c in table.causes:
        repair = "-" if c.repair_s is None else _span(c.repair_s)
        lines.append(f"{c.name}: {c.per_node_day:g}/node-day -> {c.fault} "
                     f"(repair {repair}, counts as {c.counts_as or 'no interruption'}), "
                     f"{c.per_node_day * nodes * days:.1f} expected")
    return lines


def _non_finite(text: str) -> bool:
    try:
        return not math.isfinite(float(text))
    except ValueError:
        return False


def parse_span(text: str, what: str = "--duration") -> float:
    """``7d``, ``36h``, ``90m``, ``1h30m`` or seconds: how long a run lasts."""
    raw = text.strip()
    days = 0.0
    if "d" in raw:
        head, _, raw = raw.partition("d")
        try:
            days = float(head)
        except ValueError:
            raise RatesError(f"{what} must be a span like 7d, 36h or 90m, not {text!r}") from None
    try:
        rest = parse_duration(raw, what) if raw else 0.0
    except SpecError:
        if _non_finite(raw):  # 'nan', '1e400': parse_duration refuses them as it should
            raise RatesError(f"{what} must be finite, not {text}") from None
        raise RatesError(f"{what} must be a span like 7d, 36h or 90m, not {text!r}") from None
    total = days * DAY_S + rest
    if total <= 0 or days < 0:
        raise RatesError(f"{what} must be a span longer than zero, like 7d, not {text!r}")
    return total


def with_table(scenario: Scenario | None, table: RateTable) -> Scenario:
    """The scenario a run uses when it is given a rate table: the table's own (its [fleet],
    [[job]], [[fault]]) when there is no ``--scenario``, else the scenario with the table's
    jobs and faults added (the scenario's [fleet] wins)."""
    if scenario is None:
        return table.scenario
    scenario.actions = sorted([*scenario.actions, *table.scenario.actions], key=lambda a: a.at)
    return scenario


def add_faults(scenario: Scenario, table: RateTable, nodes: list[str], *, seed: int,
               until_s: float) -> Schedule:
    """Draw the table's faults for ``nodes`` over ``[0, until_s)`` into the scenario's
    timeline; return the schedule (which fault came from which cause)."""
    drawn = schedule(table, nodes, seed=seed, until_s=until_s)
    scenario.actions = sorted([*scenario.actions, *drawn.actions], key=lambda a: a.at)
    return drawn


LIVE_HORIZON_S = 30 * DAY_S
LIVE_MAX_FAULTS = 20_000


def live_horizon_s(table: RateTable, nodes: int) -> float:
    """How far ahead a live ``fleetdeck sim --fault-rates`` draws its faults: 30 days, or
    less when that would be more than about 20,000 faults (a demo's high rates)."""
    per_s = table.fleet_rate_per_day(nodes) / DAY_S
    return LIVE_HORIZON_S if per_s <= 0 else min(LIVE_HORIZON_S, LIVE_MAX_FAULTS / per_s)
