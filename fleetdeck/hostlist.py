"""Slurm hostlist expressions: ``gpu[0010-0020,0031]`` <-> ``gpu0010 … gpu0020, gpu0031``.

The subset of Slurm's syntax operators type every day: comma-separated items, each a literal
name or a prefix with one bracketed range list (and an optional suffix). Zero padding follows
the width of the lower bound, as in Slurm (``gpu[008-011]`` gives ``gpu008 … gpu011``).
"""

import re
from collections.abc import Iterable
from functools import lru_cache

MAX_HOSTS = 1_000_000
"""Refuse expressions that expand to more names than this (a typo like ``gpu[0-99999999]``)."""

_NUMBERED = re.compile(r"^(.*?)(\d+)([^\d]*)$")


_DIGITS = re.compile(r"(\d+)")


@lru_cache(maxsize=1 << 16)
def natural_key(name: str) -> tuple[tuple[str | int, ...], str]:
    """Sort key reading the numbers in a name as numbers: ``leaf99`` before ``leaf100``,
    ``leaf601-r3`` before ``leaf601-r10``. Names the fleet makes up are not always padded to
    one width (the simulator's leaf groups are ``leaf01`` … ``leaf1024``), and string order put
    ``leaf1000`` between ``leaf100`` and ``leaf101``. The parts alternate text and number
    from the start, so any two keys compare part by part without mixing types. The name
    itself breaks a tie: ``leaf01`` and ``leaf1`` read alike as numbers, and equal keys left
    their order to whichever node was heard from first."""
    parts: list[str | int] = []
    for i, part in enumerate(_DIGITS.split(name)):
        parts.append(int(part) if i % 2 else part)
    return tuple(parts), name


class HostlistError(ValueError):
    """A hostlist expression that cannot be expanded."""


def _split_top(expr: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    items: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(expr):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise HostlistError(f"nested brackets in '{expr}'")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError(f"unbalanced ']' in '{expr}'")
        elif ch == "," and depth == 0:
            items.append(expr[start:i])
            start = i + 1
    if depth != 0:
        raise HostlistError(f"unbalanced '[' in '{expr}'")
    items.append(expr[start:])
    return [item.strip() for item in items if item.strip()]


def _expand_item(item: str, limit: int) -> list[str]:
    if "[" not in item:
        if "]" in item:
            raise HostlistError(f"unbalanced ']' in '{item}'")
        return [item]
    prefix, _, rest = item.partition("[")
    ranges, _, suffix = rest.partition("]")
    if "[" in suffix or "]" in suffix:
        raise HostlistError(f"only one bracket group per name is supported: '{item}'")
    out: list[str] = []
    for raw in ranges.split(","):
        part = raw.strip()
        if not part:
            raise HostlistError(f"empty range in '{item}'")
        lo_s, dash, hi_s = part.partition("-")
        if not lo_s.isdigit() or (dash and not hi_s.isdigit()):
            raise HostlistError(f"'{part}' is not a number or a range like 0010-0020")
        lo, hi = int(lo_s), int(hi_s) if dash else int(lo_s)
        if hi < lo:
            # Say the range the operator meant, not only what is wrong with it (a newcomer's
            # 3 a.m. run: "runs backwards" left them to work out the fix).
            raise HostlistError(f"range '{part}' runs backwards: write it low to high, "
                                f"{prefix}[{hi_s}-{lo_s}]{suffix}")
        if len(out) + hi - lo + 1 > limit:  # counted before a name is made
            raise HostlistError(f"'{item}' expands to more than {limit} names")
        width = len(lo_s)
        out.extend(f"{prefix}{n:0{width}d}{suffix}" for n in range(lo, hi + 1))
    return out


def expand(expr: str, limit: int = MAX_HOSTS) -> list[str]:
    """Expand a hostlist expression into names, in order, without duplicates; more than
    ``limit`` names is an error, raised before they are made."""
    seen: dict[str, None] = {}
    for item in _split_top(expr.strip()):
        for name in _expand_item(item, limit):
            seen[name] = None
        if len(seen) > limit:
            raise HostlistError(f"expression expands to more than {limit} names")
    return list(seen)


def compress(names: Iterable[str]) -> str:
    """The shortest-ish hostlist for ``names``: sorted, runs of numbers folded into ranges.

    Names group by (prefix, digit width, suffix); names without digits are listed as they are.
    """
    groups: dict[tuple[str, int, str], set[int]] = {}
    plain: set[str] = set()
    for name in names:
        m = _NUMBERED.match(name)
        if m is None:
            plain.add(name)
            continue
        prefix, digits, suffix = m.groups()
        groups.setdefault((prefix, len(digits), suffix), set()).add(int(digits))
    parts: list[tuple[str, str]] = [(p, p) for p in plain]
    for (prefix, width, suffix), numbers in groups.items():
        ordered = sorted(numbers)
        runs: list[str] = []
        start = prev = ordered[0]
        for n in [*ordered[1:], None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            runs.append(f"{start:0{width}d}" if start == prev
                        else f"{start:0{width}d}-{prev:0{width}d}")
            if n is not None:
                start = prev = n
        if len(runs) == 1 and "-" not in runs[0]:
            text = f"{prefix}{runs[0]}{suffix}"
        else:
            text = f"{prefix}[{','.join(runs)}]{suffix}"
        parts.append((f"{prefix}{ordered[0]:0{width}d}{suffix}", text))
    return ",".join(text for _key, text in sorted(parts))


def padded_twins(names: Iterable[str], known: Iterable[str]) -> dict[str, list[str]]:
    """For each of ``names`` not in ``known``, the known names it is most likely a typo of: the
    same prefix, number and suffix with other zero padding or case (``gpu42`` for ``gpu0042``,
    ``GPU0042``). Every twin is named: a fleet holding both ``gpu0042`` and ``gpu00042`` (two
    racks' schemes) must not be told one of them, picked by the order the nodes were heard.
    Names with no such twin are left out. Refusals add it as "did you mean …?", so a tired
    operator reads the name to type, not only that theirs is unknown."""
    index: dict[tuple[str, int, str], list[str]] = {}
    held: set[str] = set()
    for name in known:
        held.add(name)
        m = _NUMBERED.match(name)
        if m is not None:
            index.setdefault((m[1].lower(), int(m[2]), m[3].lower()), []).append(name)
    twins: dict[str, list[str]] = {}
    for name in names:
        m = _NUMBERED.match(name)
        if m is None or name in held:
            continue
        found = index.get((m[1].lower(), int(m[2]), m[3].lower()), [])
        if found:
            twins[name] = sorted(found)
    return twins


def padded_forms(name: str, widest: int = 6) -> list[str]:
    """The names ``name`` may be a padding or case typo of, for a reader that cannot list every
    name (a store): ``gpu42`` gives ``gpu042``, ``gpu0042``… up to ``widest`` digits, and the
    lower-case spelling; [] for a name without a number."""
    m = _NUMBERED.match(name)
    if m is None:
        return []
    prefix, digits, suffix = m[1].lower(), m[2], m[3].lower()
    forms = [f"{prefix}{int(digits):0{width}d}{suffix}"
             for width in range(len(str(int(digits))), widest + 1)]
    return [form for form in dict.fromkeys(forms) if form != name]


def did_you_mean(names: Iterable[str], known: Iterable[str]) -> str:
    """"did you mean gpu0042?" for the names of ``names`` that have a padded twin in ``known``
    (``padded_twins``), as a hostlist; "" when none has."""
    twins = padded_twins(names, known)
    meant = [twin for found in twins.values() for twin in found]
    return f"did you mean {compress(meant)}?" if meant else ""


def looks_like_hostlist(text: str) -> bool:
    """True for ``gpu[1-4]``-style input (brackets with digits), used by filters to pick a mode."""
    return _HOSTLIST_RE.fullmatch(text.strip()) is not None


_HOSTLIST_RE = re.compile(r"[A-Za-z0-9._-]*\[[\d,\s-]+\][A-Za-z0-9._-]*(,.+)?")
