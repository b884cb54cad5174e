"""CLI glue for ``fleetdeck record`` and ``fleetdeck replay``: arguments, progress lines, output."""

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

from fleetdeck.brokerurl import BrokerURL
from fleetdeck.console.cli.progress import ProgressLine
from fleetdeck.console.judgements import utc_hms
from fleetdeck.console.recording import (
    GAP_NOTE,
    MAX_NOTES,
    ReadReport,
    damage_text,
    is_gap_note,
    judged_note,
)
from fleetdeck.console.replay import (
    RecordStats,
    already_exists,
    human_bytes,
    record,
    replay_headless,
    seek_needs_end,
    seek_target,
)
from fleetdeck.console.republish import Republished, republish
from fleetdeck.errors import UserError
from fleetdeck.paths import recording_out


def run_record(url: BrokerURL, cluster: str, out: str, duration: float | None, *,
               force: bool = False) -> int:
    import signal

    path = recording_out(out)
    if path.exists() and not force:
        raise UserError(already_exists(path))
    bar = ProgressLine(f"recording {path.name}", duration, unit="s")

    def progress(s: RecordStats) -> None:
        bar.update(time.time() - s.started, detail=(
            f"{s.messages:,} messages, {human_bytes(s.bytes_in)} in, "
            f"{human_bytes(s.file_bytes)} on disk"))

    async def main() -> RecordStats:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        return await record(url, cluster, path, duration, progress, stop, bar.milestone,
                            force=force)

    with bar:
        stats = asyncio.run(main())
        progress(stats)  # where it ended: the bar full at --duration, the last count
    if not stats.created:
        print(f"stopped before the broker answered; nothing recorded, {path} was not written",
              file=sys.stderr)
        return 0
    gaps = (f", {stats.gaps} gap(s) where the broker was away, marked in the recording"
            if stats.gaps else "")
    print(f"recorded {stats.messages} messages to {path} "
          f"({human_bytes(stats.file_bytes)}){gaps}", file=sys.stderr)
    if not stats.node_messages:
        seen = (f" (clusters with nodes there: {', '.join(stats.clusters_seen)})"
                if stats.clusters_seen else "")
        print(f"fleetdeck record: the recording holds no message of a node of cluster "
              f"'{cluster}'{seen}: nothing to replay.", file=sys.stderr)
        return EXIT_NOTHING_RECORDED
    return 0


EXIT_NOTHING_RECORDED = 3
"""``record`` heard no node of its cluster in all its time (as ``status`` exits 3 unseen)."""


def run_replay(args: Any) -> int:
    import json

    path = Path(args.file)
    to = getattr(args, "to_ambiguous", None)
    if to is not None:
        if "://" in to:
            raise UserError(f"--to {to}: did you mean --to-broker {to}?")
        raise UserError(f"--to {to}: say which: --headless --until {to} stops that far into "
                        "the recording, --to-broker URL replays it into a broker.")
    if not 0.5 <= args.speed <= 100:
        raise UserError(f"--speed must be between 0.5 and 100, not {args.speed:g}.")
    headless_only = [flag for flag, given in (("--until", args.until is not None),
                                              ("--tick", args.tick is not None),
                                              ("--summary-json", args.summary_json)) if given]
    if headless_only and not args.headless:
        # Without --headless these opened the console (in a pipe, escape codes), ignored.
        verb = "works" if len(headless_only) == 1 else "work"
        raise UserError(f"{' and '.join(headless_only)} only {verb} with --headless (add it for "
                        "the final state without the console).")
    broker_only = [flag for flag, given in (("--as-cluster", args.as_cluster is not None),
                                            ("--force", args.force)) if given]
    if broker_only and not args.to_broker:
        verb = "works" if len(broker_only) == 1 else "work"
        raise UserError(f"{' and '.join(broker_only)} only {verb} with --to-broker URL.")
    if args.to_broker:
        from fleetdeck.brokerurl import parse_broker_url

        url = parse_broker_url(args.to_broker)

        def progress(sent: int, at: float) -> None:
            print(f"replayed {sent} messages, {at:.0f} s into the recording", file=sys.stderr)

        done = asyncio.run(republish(path, url, args.speed, as_cluster=args.as_cluster,
                                     force=args.force, progress=progress))
        tell_republished(done, url)
        assert done.report is not None
        return tell_damage(done.report)
    if args.headless:
        until = None if args.until is None else until_s(path, args.until)
        # Measured in the file read, or with --until in recorded time (the file is not read
        # to its end then).
        bar = (ProgressLine(f"replaying {path.name}", fmt=human_bytes) if until is None else
               ProgressLine(f"replaying {path.name}", until, unit="s of recorded time"))

        def read_so_far(read: int, size: int, replayed_s: float) -> None:
            if until is None:
                bar.update(read, size, detail=f"{replayed_s:,.0f} s of recorded time")
            else:
                bar.update(replayed_s)

        with bar:
            out = replay_headless(path, until, tick_s=args.tick or 0.5,
                                  progress=read_so_far)
        rep = out["replay"]
        if until is not None and rep["end"] + 0.5 < rep["start"] + until:
            # It ran to the end: a --until past it read as "the recording is that long". Past
            # its end as said to the nearest second (``until_s``): "--until 04:02:56 is past the
            # recording's end; replayed all of it, to 04:02:56 UTC" (a review).
            print(f"fleetdeck replay: --until {args.until} is past the recording's end; "
                  f"replayed all of it, to {utc_hms(round(rep['end']))} UTC "
                  f"({rep['end'] - rep['start']:.1f} s in).", file=sys.stderr)
        status = tell_damage(ReadReport(skipped=rep["skipped_lines"], problems=rep["problems"],
                                        truncated=rep["truncated"],
                                        unreadable_rest=rep["unreadable_rest"]))
        if args.summary_json:
            print(json.dumps(out, indent=2))
        else:
            from rich.console import Console

            from fleetdeck.console.cli.status import render_summary

            render_summary(out, Console())
            judged = rep["judged_at_start"]
            if judged:
                print(f"fleetdeck replay: {judged_note(len(judged))}.", file=sys.stderr)
        return status
    from fleetdeck.console.tui.app import run_replay_console

    return run_replay_console(path, speed=args.speed)


def until_s(path: Path, arg: str) -> float:
    """``--until`` in recorded seconds from the start: what ``:seek`` takes (one parser,
    ``seek_target``), a clock time of the recording's own day(s) included ("--until 04:02:30"
    was refused while ":seek 04:02:30" went there: an SRE's run)."""
    from fleetdeck.console.recording import RecordingReader

    reader = RecordingReader(path)
    start = reader.header.started
    # The end only matters to a clock time (which of the recording's days) and to "end"; it
    # costs a read.
    end = reader.end_time() if seek_needs_end(arg) else None
    try:
        target = seek_target(arg, start, start, end)
    except ValueError as err:
        raise UserError(f"--until: {err}.") from None
    if target < start - 0.5:
        # To the nearest second, as the replay's header and seek notes say its ends.
        raise UserError(f"--until {arg} is before the recording, which starts at "
                        f"{utc_hms(round(start))} UTC.")
    target = max(target, start)
    return target - start


INTENT_NAMES = {"cmd": "node command",
                "console_cmd": "console's keyframe, rebirth or re-send request",
                "sched_cmd": "scheduler command",
                "rebirth": "rebirth request", "sim": "simulator fault message",
                "other": "message on another topic"}


def tell_republished(done: Republished, url: BrokerURL) -> None:
    """What went out, what was left out and why, and what the broker keeps, on stderr."""
    print(f"replayed {done.sent} messages into {url} as cluster '{done.cluster}' (watch it: "
          f"fleetdeck console --broker {url} --cluster {done.cluster})", file=sys.stderr)
    if done.intents_left_out:
        left = ", ".join(f"{n} {INTENT_NAMES.get(k, k)}{'s' if n != 1 else ''}"
                         for k, n in sorted(done.intents_left_out.items()))
        print(f"left out what was asked of the recorded fleet ({left}): published again, "
              f"it would act on whatever listens to cluster '{done.cluster}' now",
              file=sys.stderr)
    if done.retained:
        print(f"the broker keeps {done.retained} retained messages of cluster '{done.cluster}' "
              "(births, statuses, job statuses): a console started later shows its nodes, "
              "offline or stale once their agents stay silent", file=sys.stderr)


def tell_damage(report: ReadReport) -> int:
    """One sentence on stderr for gaps, one for damage; the exit status: 1 when damage was
    skipped (what could be read was replayed all the same), else 0 (docs/recording.md)."""
    gaps = [p[len(GAP_NOTE):] for p in report.problems if is_gap_note(p)]
    if gaps:
        more = "+" if len(gaps) >= MAX_NOTES else ""
        print(f"fleetdeck replay: the recording has {len(gaps)}{more} gap(s) where the recorder "
              f"had lost the broker; first: {gaps[0]}.", file=sys.stderr)
    text = damage_text(report)
    if not text:
        return 0
    print(f"fleetdeck replay: {text}", file=sys.stderr)
    return 1
