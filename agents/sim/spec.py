"""Timeline actions (faults, repairs, job submissions) as plain validated data.

One parser serves scenario files (``[[timeline]]`` tables) and runtime injection
(``fleetdeck inject FAULT key=value …``), so both accept exactly the same vocabulary and give
the same one-sentence errors.
"""

import math
import re
from dataclasses import dataclass, field
from typing import Any

from fleetdeck.protocol import xids

Value = bool | int | float | str


class SpecError(ValueError):
    """A timeline entry or injection that cannot be understood (one plain sentence)."""


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: object, what: str = "duration") -> float:
    """``"30s"``, ``"2m"``, ``"1m30s"``, ``"500ms"``, ``"1h"`` or a number of seconds."""
    if isinstance(value, bool):
        raise SpecError(f"{what} must be a duration like '30s', not {value!r}")
    if isinstance(value, int | float):
        # NaN passed the sign check, and 'inject thermal duration=nan' said "injected" for a
        # fault that ended before it began (every comparison with NaN is false).
        if not math.isfinite(value):
            raise SpecError(f"{what} must be a finite duration like '30s', not {value!r}")
        if value < 0:
            raise SpecError(f"{what} must not be negative")
        return float(value)
    if isinstance(value, str):
        text = value.strip().replace(" ", "")
        try:
            return parse_duration(float(text), what)
        except ValueError:
            pass
        pos = 0
        total = 0.0
        for m in _DURATION.finditer(text):
            if m.start() != pos:
                break
            total += float(m.group(1)) * _UNIT_S[m.group(2)]
            pos = m.end()
        if pos == len(text) and text:
            return total
    raise SpecError(f"{what} must be a duration like '30s', '2m' or '1m30s', not {value!r}")


@dataclass(frozen=True)
class Param:
    kind: str
    """node, leaf, job, int, float, duration, bool, str, phys, codes"""
    default: Value | None = None
    required: bool = False
    lo: float | None = None
    hi: float | None = None


_TARGET = {"node": Param("node"), "job": Param("str"), "index": Param("int", 0, lo=0)}
_PORT = Param("int", 0, lo=0, hi=7)
_GPU = Param("int", 0, lo=0, hi=7)
MAX_XID = 999
MAX_FOLLOW_ONS = 8
_UNTIL = Param("duration", None)
"""Optional: recover by itself after this long (otherwise a ``repair`` ends it)."""
POWER_LIMIT_W = 700.0
"""An H100 SXM's stock power limit (agents/sim/node.py's GPUs run at it)."""
POWER_CAP_MIN_W = 100.0
"""The lowest limit ``power_cap`` sets: below it no H100 does useful work."""

KINDS: dict[str, dict[str, Param]] = {
    # InfiniBand (TELEMETRY.md §8.1-8.3)
    "ib_flap": {**_TARGET, "port": _PORT, "count": Param("int", 5, lo=1, hi=255),
                "down": Param("duration", 2.0), "every": Param("duration", 6.0)},
    "link_down": {**_TARGET, "port": _PORT, "phys": Param("phys", "Polling"),
                  "duration": _UNTIL},
    "symbol_storm": {**_TARGET, "port": _PORT, "rate": Param("float", 200.0, lo=1, hi=10_000),
                     "bandwidth": Param("float", 0.5, lo=0.01, hi=1.0), "duration": _UNTIL},
    "leaf_switch": {"leaf": Param("leaf"), **_TARGET, "rail": Param("int", None, lo=0, hi=7),
                    "duration": _UNTIL},
    # GPU (§8.4-8.7, 8.9)
    "xid79": {**_TARGET, "gpu": _GPU},
    "xid": {**_TARGET, "gpu": _GPU, "code": Param("int", required=True, lo=1, hi=MAX_XID),
            "then": Param("codes", None),
            "action": Param("int", None, lo=0, hi=max(xids.RECOVERY_ACTIONS))},
    "ecc_dbe": {**_TARGET, "gpu": _GPU, "remap_failure": Param("bool", False)},
    "thermal": {**_TARGET, "gpu": _GPU, "temp": Param("float", 91.0, lo=70, hi=105),
                "clock_mhz": Param("float", 1500.0, lo=300, hi=1980), "duration": _UNTIL},
    # A limit lowered by software (nvidia-smi -pl, a power budget): the console's power cap
    # (bit 0x4) had no fault to rehearse it with (docs/scenarios.md, ``power_cap``).
    "power_cap": {**_TARGET, "gpu": _GPU,
                  "limit": Param("float", required=True, lo=POWER_CAP_MIN_W, hi=POWER_LIMIT_W),
                  "duration": _UNTIL},
    "nvlink": {**_TARGET, "gpu": _GPU, "links": Param("int", 2, lo=1, hi=18)},
    "pcie_replay": {**_TARGET, "gpu": _GPU, "per_min": Param("float", 120.0, lo=1, hi=100_000),
                    "duration": _UNTIL},
    # whole node (§8.8)
    "agent_death": {**_TARGET},
    "node_death": {**_TARGET},
    # recovery
    "repair": {"leaf": Param("leaf"), **_TARGET},
    "agent_restart": {**_TARGET, "only_dead": Param("bool", False)},
    # work
    "submit": {"name": Param("str", required=True), "user": Param("str", "sim"),
               "nodes": Param("int", 1, lo=1, hi=4096), "steps": Param("int", 1000, lo=1),
               "checkpoint_every": Param("int", 100, lo=1),
               "step_time": Param("duration", 1.2), "requeue": Param("bool", True)},
    "cancel": {"job": Param("str", required=True)},
    "job_hang": {"job": Param("str", required=True), "duration": _UNTIL},
}

NODE_LESS = frozenset({"submit", "cancel", "job_hang"})
"""Kinds that do not act on a node."""
LEAF_OR_NODE = frozenset({"leaf_switch", "repair"})


@dataclass(frozen=True)
class Action:
    """One timeline entry: do ``kind`` at sim time ``at`` (seconds) with ``params``."""

    at: float
    kind: str
    params: dict[str, Value | None] = field(default_factory=dict)

    def get(self, name: str) -> Any:
        return self.params.get(name)

    def describe(self) -> str:
        args = " ".join(f"{k}={v}" for k, v in self.params.items()
                        if v is not None and not (k == "index" and v == 0))
        return f"{self.kind} {args}".strip()


def _coerce(name: str, p: Param, raw: object, kind: str) -> Value | None:
    what = f"{kind}: {name}"
    if raw is None:
        return None
    if p.kind == "duration":
        return parse_duration(raw, what)
    if p.kind == "bool":
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.lower() in ("true", "false", "yes", "no", "1", "0"):
            return raw.lower() in ("true", "yes", "1")
        raise SpecError(f"{what} must be true or false, not {raw!r}")
    if p.kind in ("int", "float"):
        if isinstance(raw, bool):
            raise SpecError(f"{what} must be a number, not {raw!r}")
        try:
            if not isinstance(raw, int | float | str):
                raise TypeError
            num: int | float = int(raw) if p.kind == "int" else float(raw)
        except (TypeError, ValueError, OverflowError):  # int(inf): a TOML 'count = inf'
            raise SpecError(f"{what} must be {'an integer' if p.kind == 'int' else 'a number'}, "
                            f"not {raw!r}") from None
        # NaN slips past both bounds ('inject thermal temp=nan' was "injected" and heated
        # nothing), and inf past an open one; TOML spells both too (nan, inf).
        if not math.isfinite(num):
            raise SpecError(f"{what} must be a finite number, not {raw!r}")
        if p.kind == "int" and isinstance(raw, float) and raw != int(raw):
            raise SpecError(f"{what} must be an integer, not {raw!r}")
        if (p.lo is not None and num < p.lo) or (p.hi is not None and num > p.hi):
            lo = "" if p.lo is None else f"{p.lo:g}"
            hi = "" if p.hi is None else f"{p.hi:g}"
            raise SpecError(f"{what} must be in [{lo}, {hi}], not {raw!r}")
        return num
    if p.kind == "codes":
        return _codes(raw, what)
    if p.kind == "phys":
        if raw not in ("Polling", "Disabled"):
            raise SpecError(f"{what} must be 'Polling' (cable/peer gone) or 'Disabled', "
                            f"not {raw!r}")
        return str(raw)
    if not isinstance(raw, str) or not raw:
        raise SpecError(f"{what} must be a non-empty string, not {raw!r}")
    return raw


def _codes(raw: object, what: str) -> str:
    """XID codes as ``45``, ``"45,13"`` (the command line) or ``[45, 13]`` (TOML), kept as the
    canonical text ``"45,13"`` (one scalar, so an action stays plain data)."""
    items: list[object]
    if isinstance(raw, list | tuple):
        items = list(raw)
    elif isinstance(raw, str):
        items = [x.strip() for x in raw.split(",")] if raw.strip() else []
    else:
        items = [raw]
    codes: list[int] = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, int | str):
            raise SpecError(f"{what} must be XID codes like 45 or '45,13', not {raw!r}")
        try:
            code = int(item)
        except ValueError:
            raise SpecError(f"{what} must be XID codes like 45 or '45,13', not {raw!r}") from None
        if not 1 <= code <= MAX_XID:
            raise SpecError(f"{what} must be XID codes in [1, {MAX_XID}], not {item!r}")
        codes.append(code)
    if not codes or len(codes) > MAX_FOLLOW_ONS:
        raise SpecError(f"{what} must list 1 to {MAX_FOLLOW_ONS} XID codes, not {raw!r}")
    return ",".join(map(str, codes))


def xid_codes(action: Action) -> list[int]:
    """The codes an ``xid`` action logs, in order: ``code``, then each of ``then``."""
    then = action.get("then")
    return [int(action.get("code")), *(int(c) for c in str(then).split(",") if then)]


RECOVERY_DEFAULT = 2
"""The recovery action an injected XID 154 states when none is given: node reboot required,
what the driver asks for after most uncontained errors (docs/scenarios.md)."""


def xid_recovery_action(action: Action) -> int | None:
    """The recovery action an ``xid`` action's XID 154 states (``action=``, else
    ``RECOVERY_DEFAULT``), or None when it logs no XID 154."""
    if xids.RECOVERY not in xid_codes(action):
        return None
    given = action.get("action")
    return RECOVERY_DEFAULT if given is None else int(given)


def parse_action(entry: dict[str, object], *, default_at: float | None = None) -> Action:
    """Validate one ``{"at": …, "fault": kind, …}`` mapping into an :class:`Action`."""
    data = dict(entry)
    kind = data.pop("fault", None) or data.pop("action", None)
    if kind is None:
        # The docs' table heads the column "kind": a [[fault]] with kind = "xid79" read
        # "unknown fault None" (a newcomer's run). Name the key that holds a kind.
        misplaced = next((k for k, v in data.items() if isinstance(v, str) and v in KINDS), None)
        hint = (f"; {misplaced} = \"{data[misplaced]}\" is no setting: write "
                f"fault = \"{data[misplaced]}\"") if misplaced is not None else ""
        raise SpecError(f"'fault' is required: the kind, e.g. fault = \"ib_flap\"{hint}")
    if not isinstance(kind, str) or kind not in KINDS:
        known = ", ".join(sorted(KINDS))
        raise SpecError(f"unknown fault {kind!r} (choose from: {known})")
    raw_at = data.pop("at", default_at)
    if raw_at is None:
        raise SpecError(f"{kind}: 'at' is required (e.g. at = \"30s\")")
    at = parse_duration(raw_at, f"{kind}: at")
    schema = KINDS[kind]
    unknown = sorted(set(data) - set(schema))
    if unknown:
        raise SpecError(f"{kind}: unknown parameter(s) {', '.join(unknown)} "
                        f"(known: {', '.join(sorted(schema))})")
    params: dict[str, Value | None] = {}
    for name, p in schema.items():
        raw = data.get(name, p.default)
        if raw is None and p.required:
            raise SpecError(f"{kind}: '{name}' is required")
        params[name] = _coerce(name, p, raw, kind)
    if kind == "xid" and params.get("action") is not None and xids.RECOVERY not in xid_codes(
            Action(at, kind, params)):
        raise SpecError(f"xid: action is the recovery action an XID {xids.RECOVERY} states "
                        f"(give code={xids.RECOVERY} or then={xids.RECOVERY})")
    if kind not in NODE_LESS:
        has_node = params.get("node") is not None or params.get("job") is not None
        if kind in LEAF_OR_NODE:
            if not has_node and params.get("leaf") is None:
                raise SpecError(f"{kind}: give node=…, job=… or leaf=…")
        elif not has_node:
            raise SpecError(f"{kind}: give node=… (or job=… and index=… to hit a job's node)")
    return Action(at, kind, params)


def parse_kv(args: list[str]) -> dict[str, object]:
    """``["node=gpu0012", "port=3"]`` -> ``{"node": "gpu0012", "port": "3"}`` (coerced later)."""
    out: dict[str, object] = {}
    for arg in args:
        key, sep, value = arg.partition("=")
        if not sep or not key:
            raise SpecError(f"expected key=value, not {arg!r}")
        out[key.strip()] = value.strip()
    return out
