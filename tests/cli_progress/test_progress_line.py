"""console/cli/progress.py: plain lines when stderr is not a terminal (milestones, quarters, at
most one every PLAIN_EVERY_S), a rich bar when it is."""

import io

from fleetdeck.console.cli.progress import (
    DELAY_ENV,
    PLAIN_EVERY_S,
    ProgressLine,
    progress_delay,
)


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_plain_lines_at_quarters_milestones_and_every_few_seconds():
    out, clock = io.StringIO(), Clock()
    with ProgressLine("replaying x", 100, unit="MB", stream=out, tty=False, clock=clock,
                      delay_s=0) as bar:
        bar.milestone("connected")
        for done in range(0, 101, 5):  # 21 updates in no time: only quarters make lines
            bar.update(done)
        clock.t += PLAIN_EVERY_S
        bar.update(100, detail="done reading")
    lines = out.getvalue().splitlines()
    assert lines[0] == "replaying x: connected"
    assert lines[1] == "replaying x:   0% (0 of 100 MB)"
    assert [line.split("%")[0].split()[-1] for line in lines[2:5]] == ["25", "50", "75"]
    assert lines[-1] == "replaying x: 100% (100 of 100 MB), done reading"
    assert len(lines) == 6


def test_plain_without_a_total_counts_and_throttles():
    out, clock = io.StringIO(), Clock()
    bar = ProgressLine("collect c", stream=out, tty=False, clock=clock, unit="nodes",
                       delay_s=0)
    with bar:
        for n in range(50):
            bar.update(n)
            clock.t += 0.5  # 25 s in all: a line at 0 s, then one every 5 s
    lines = out.getvalue().splitlines()
    assert lines[0] == "collect c: 0 nodes"
    assert 5 <= len(lines) <= 7
    assert lines[-1] == "collect c: 49 nodes"
    bar.close("said once")  # closing twice prints nothing more
    assert out.getvalue().splitlines()[-1] == "collect c: 49 nodes"


def test_nothing_shows_for_work_shorter_than_the_delay():
    """As git's progress: a job done within the delay prints no progress, only milestones."""
    for tty in (False, True):
        out, clock = io.StringIO(), Clock()
        with ProgressLine("replaying x", 10, stream=out, tty=tty, clock=clock,
                          delay_s=2.0) as bar:
            for done in range(11):
                bar.update(done)
                clock.t += 0.1
            bar.milestone("a warning-free milestone")
        assert out.getvalue() == "replaying x: a warning-free milestone\n"
    out, clock = io.StringIO(), Clock()
    with ProgressLine("recording r", 4, unit="s", stream=out, tty=False, clock=clock,
                      delay_s=2.0) as bar:
        for done in range(5):
            bar.update(done)
            clock.t += 1.0
    assert out.getvalue().splitlines() == ["recording r:  50% (2 of 4 s)",
                                           "recording r:  75% (3 of 4 s)",
                                           "recording r: 100% (4 of 4 s)"]


def test_the_delay_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv(DELAY_ENV, "0.5")
    assert progress_delay() == 0.5
    for bad in ("soon", "-1"):
        monkeypatch.setenv(DELAY_ENV, bad)
        assert progress_delay() == 2.0
    monkeypatch.delenv(DELAY_ENV)
    assert progress_delay() == 2.0


def test_close_with_text_and_nothing_before_it():
    out = io.StringIO()
    with ProgressLine("sim c", 4, stream=out, tty=False, delay_s=0) as bar:
        bar.close("all 4 agents connected")
    assert out.getvalue() == "all 4 agents connected\n"  # no update: no status line


def test_a_terminal_gets_a_rich_bar():
    out = io.StringIO()
    with ProgressLine("recording r.jsonl", 4, unit="s", stream=out, tty=True,
                      delay_s=0) as bar:
        bar.milestone("connected to mqtt://x")
        bar.update(2, detail="10 messages")
        bar.update(4, detail="20 messages")
    text = out.getvalue()
    assert "recording r.jsonl: connected to mqtt://x" in text
    assert "━" in text and "100%" in text and "20 messages" in text


def test_collect_status_line_counts_one_in_the_singular():
    """``collect``'s minute line of a one-node fleet said "1 nodes, 1 messages received"."""
    from fleetdeck.console.cli.collect import status_line

    assert status_line("c", "", 1, 1, 1, 1) == ("collect c: 1 node, 1 message received, "
                                                "1 store write")
    assert status_line("c", "", 2, 5, 4, 0) == ("collect c: 2 nodes, 5 messages received "
                                                "(4 applied), 0 store writes")


def test_a_shards_part_of_the_line_counts_one_digest_in_the_singular():
    """A shard's minute line said "1 digests" (a review)."""
    from fleetdeck.console.cli.collect import shard_words

    assert shard_words("shard-1", ["shard-1", "shard-2"], 1) == (
        " shard-1 (live: shard-1,shard-2), 1 digest,")
    assert shard_words("shard-1", ["shard-1"], 3).endswith(", 3 digests,")
