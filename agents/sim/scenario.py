"""Scenario files: a fleet shape, jobs and a fault timeline in TOML (format: docs/scenarios.md).

Built-in scenarios live in ``agents/scenarios/<name>.toml``; ``--scenario demo`` finds them by
name, anything with a slash or ``.toml`` is a path.
"""

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetdeck.agents.sim.spec import Action, SpecError, parse_action, parse_duration
from fleetdeck.paths import not_a_file

BUILTIN_DIR = Path(__file__).resolve().parent.parent / "scenarios"

FLEET_KEYS = {"nodes", "nodes_per_leaf", "nodes_per_rack", "leaves_per_spine_group",
              "hang_timeout", "jobs"}


@dataclass
class Scenario:
    name: str
    description: str = ""
    nodes: int | None = None
    nodes_per_leaf: int | None = None
    nodes_per_rack: int | None = None
    leaves_per_spine_group: int | None = None
    hang_timeout_s: float | None = None
    background_jobs: int | None = None
    actions: list[Action] = field(default_factory=list)


def builtin_names() -> list[str]:
    return sorted(p.stem for p in BUILTIN_DIR.glob("*.toml"))


def resolve(ref: str, what: str = "scenario", pattern: str = "*.toml") -> Path:
    """A built-in file by name (``agents/scenarios/<name>.toml``) or a path; ``what`` names the
    kind of file in the error ('scenario', 'rate table') and ``pattern`` the built-in ones."""
    if "/" in ref or ref.endswith(".toml"):
        path = Path(ref)
    else:
        path = BUILTIN_DIR / f"{ref}.toml"
        if not path.is_file():
            # A scenario list without the rate tables: "built in: demo, rates-week" offered a
            # rate table that --scenario then refused (a newcomer's run).
            names = sorted(p.stem for p in BUILTIN_DIR.glob(pattern)
                           if what != "scenario" or not p.stem.startswith("rates-"))
            raise SpecError(f"no built-in {what} '{ref}' (built in: "
                            f"{', '.join(names) or 'none'}; or give a .toml path)")
    why = not_a_file(path)
    if why == "does not exist":
        raise SpecError(f"{what} file '{ref}' not found")
    if why:
        raise SpecError(f"{what} file '{ref}' {why}")
    return path


def read_toml(ref: str, what: str = "scenario", pattern: str = "*.toml"
              ) -> tuple[Path, dict[str, Any]]:
    """The file ``ref`` names, parsed; every way it can fail is one sentence (SpecError)."""
    path = resolve(ref, what, pattern)
    try:
        return path, tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as err:  # "[Errno 13] Permission denied: '<the path again>'" was said
        raise SpecError(f"cannot read {what} '{path}': "
                        f"{(err.strerror or str(err)).lower()}") from None
    except UnicodeDecodeError:
        # Python's codec sentence ("'utf-8' codec can't decode byte 0xff in position 0")
        # was said; a file saved as UTF-16, or a binary one, ends here (agents/config.py too).
        raise SpecError(f"{what} '{path}' is not a UTF-8 text file, as TOML must be") from None
    except tomllib.TOMLDecodeError as err:
        raise SpecError(f"{what} '{path}' is not valid TOML: {err}") from None


def load_scenario(ref: str) -> Scenario:
    path, data = read_toml(ref)
    if "rates" in data:
        raise SpecError(f"'{ref}' is a fault-rate table, not a scenario: run it with "
                        f"--fault-rates {ref}")
    try:
        return parse_scenario(data, default_name=path.stem)
    except SpecError as err:
        raise SpecError(f"scenario '{path}': {err}") from None


def _int(value: Any, what: str, lo: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise SpecError(f"{what} must be an integer ≥ {lo}, not {value!r}")
    return value


def parse_scenario(data: dict[str, Any], default_name: str = "scenario") -> Scenario:
    unknown = sorted(set(data) - {"name", "description", "fleet", "job", "fault"})
    if unknown:
        raise SpecError(f"unknown top-level key(s) {', '.join(unknown)} "
                        "(known: name, description, [fleet], [[job]], [[fault]])")
    sc = Scenario(name=str(data.get("name", default_name)),
                  description=str(data.get("description", "")))
    fleet = data.get("fleet", {})
    if not isinstance(fleet, dict):
        raise SpecError("[fleet] must be a table")
    bad = sorted(set(fleet) - FLEET_KEYS)
    if bad:
        raise SpecError(f"[fleet]: unknown key(s) {', '.join(bad)} "
                        f"(known: {', '.join(sorted(FLEET_KEYS))})")
    if "nodes" in fleet:
        sc.nodes = _int(fleet["nodes"], "[fleet] nodes")
    if "nodes_per_leaf" in fleet:
        sc.nodes_per_leaf = _int(fleet["nodes_per_leaf"], "[fleet] nodes_per_leaf")
    if "nodes_per_rack" in fleet:
        sc.nodes_per_rack = _int(fleet["nodes_per_rack"], "[fleet] nodes_per_rack")
    if "leaves_per_spine_group" in fleet:
        sc.leaves_per_spine_group = _int(fleet["leaves_per_spine_group"],
                                         "[fleet] leaves_per_spine_group")
    if "hang_timeout" in fleet:
        sc.hang_timeout_s = parse_duration(fleet["hang_timeout"], "[fleet] hang_timeout")
    if "jobs" in fleet:
        sc.background_jobs = _int(fleet["jobs"], "[fleet] jobs", lo=0)
    for i, entry in enumerate(_tables(data, "job")):
        try:
            sc.actions.append(parse_action({**entry, "fault": "submit"}, default_at=0))
        except SpecError as err:
            raise SpecError(f"[[job]] #{i + 1}: {err}") from None
    for i, entry in enumerate(_tables(data, "fault")):
        try:
            sc.actions.append(parse_action(entry))
        except SpecError as err:
            raise SpecError(f"[[fault]] #{i + 1}: {err}") from None
    sc.actions.sort(key=lambda a: a.at)
    return sc


def _tables(data: dict[str, Any], key: str) -> list[dict[str, object]]:
    items = data.get(key, [])
    if not isinstance(items, list) or not all(isinstance(x, dict) for x in items):
        raise SpecError(f"'{key}' must be written as [[{key}]] tables")
    return items
