"""Small text helpers shared by the screens."""

from textual.content import Content


def esc(text: str) -> str:
    """Make untrusted text safe inside Textual markup (node ids, reasons, broker errors …)."""
    return text.replace("\\", "\\\\").replace("[", "\\[")


def plural(n: int, word: str, words: str = "") -> str:
    """``1 node``, ``2 nodes``; irregular plurals given: ``plural(n, "leaf", "leaves")``."""
    return f"{n} {word if n == 1 else (words or word + 's')}"


Part = tuple[str, str, int]
"""A title's part: its markup, a shorter wording ('' keeps it), and its drop rank (0: kept
whatever the width; the highest goes first)."""


def cells(markup: str) -> int:
    return Content.from_markup(markup).cell_length


def fit_parts(parts: "list[Part]", width: int, sep: str = "  ", hint: str = "",
              last: "list[Part] | None" = None) -> str:
    """``parts`` joined by ``sep``, then ``hint`` (markup) two spaces on, in ``width`` cells: in
    full where they fit, else in their short words, else without the hint, then without the
    least useful part (highest rank) first; what still does not fit is cut by its widget. A
    width of 0 or less (not laid out yet) keeps every part in full. Titles cut at 160 columns
    lost their last, most telling words ("1 failed, not r…") where a hint a newcomer needs
    once stood after them (a 3 a.m. drive). ``last``: fewer parts saying the same in sum (the
    jobs held up, one count for every cause), tried the same way when ``parts`` cannot fit
    even with every droppable part left out."""
    def joined(ps: "list[str]", tail: str) -> str:
        return sep.join(ps) + (f"  {tail}" if tail else "")

    full = joined([p[0] for p in parts], hint)
    if width <= 0 or cells(full) <= width:
        return full
    kept = [(p[1] or p[0], p[2]) for p in parts]
    if cells(shorter := joined([m for m, _ in kept], hint)) <= width:
        return shorter
    for rank in sorted({r for _, r in kept if r}, reverse=True):
        if cells(joined([m for m, _ in kept], "")) <= width:
            break
        kept = [(m, r) for m, r in kept if r != rank]
    said = joined([m for m, _ in kept], "")
    if last is not None and cells(said) > width:
        return fit_parts(last, width, sep)
    return said


def job_count_parts(running: int, sick: int, by_switch: int, stalled: int, failed: int,
                    slow: int, merged: bool = False) -> "list[Part]":
    """The jobs' counts of the overview's jobs panel and the jobs view, each with its short
    words: what holds a job up kept longest, a straggler (slow, not stopped) and the running
    count given up first. ``merged``: the jobs held up by a node, a switch or a hang in one
    count, for a line too short for each cause (the jobs view at 100 columns cut "1 held by
    node  3 held by switch  1 fai…" while a leaf switch was down: a 3 a.m. drive); which
    job is held up by what is on its row."""
    parts: list[Part] = [(f"{running} running", "", 2)]
    if merged:
        if held := sick + by_switch + stalled:
            parts.append((f"[$error]{held} held up[/]", "", 0))
        return parts + job_count_parts(0, 0, 0, 0, failed, slow)[1:]
    if sick:
        parts.append((f"[$error]{sick} held up by a node[/]", f"[$error]{sick} held by node[/]", 0))
    if by_switch:
        parts.append((f"[$error]{by_switch} held up by a switch[/]",
                      f"[$error]{by_switch} held by switch[/]", 0))
    if stalled:
        parts.append((f"[$error]{stalled} not stepping[/]", f"[$error]{stalled} stalled[/]", 0))
    if failed:
        parts.append((f"[$error]{failed} failed, not restarted[/]",
                      f"[$error]{failed} failed[/]", 0))
    if slow:
        parts.append((f"[$warning]{slow} with a straggler[/]",
                      f"[$warning]{slow} straggling[/]", 1))
    return parts
