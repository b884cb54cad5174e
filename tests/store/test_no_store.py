"""``events``, ``history`` and ``report`` with no store: one sentence, and after ``fleetdeck
demo`` (whose store lives in a run directory of its own) the newest demo store to pass."""

import os

import pytest

from fleetdeck.cli import main
from fleetdeck.demo import STORE_FILE, demo_dir


@pytest.mark.parametrize("args", [["events"], ["history", "gpu0001"], ["report"]])
def test_no_store_names_the_newest_demo_store(args, capsys):
    older = demo_dir(now=1_800_000_000) / STORE_FILE
    newer = demo_dir(now=1_800_000_600) / STORE_FILE
    for n, path in enumerate((older, newer)):
        path.write_bytes(b"")
        os.utime(path, (1_800_000_000 + n, 1_800_000_000 + n))
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no store at" in err
    assert f"the newest demo run's store is {newer} (1 older demo store(s) beside it): pass " \
           f"--db {newer}." in err


def test_no_store_and_no_demo_run_says_how_to_get_one(capsys):
    assert main(["events"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no store at" in err and "pass --db FILE)." in err
    assert "newest demo run" not in err


@pytest.mark.parametrize("args", [["events"], ["report"]])
def test_an_empty_default_store_names_a_newer_demo_store(args, capsys):
    """A collector started once by hand (its broker unreachable) leaves an empty store at the
    default path; events and report then printed an empty table, rc 0, and never named the
    demo's store they had pointed to before."""
    import asyncio

    from fleetdeck.console.store import Store
    from fleetdeck.paths import state_base

    default = state_base() / "demo.db"

    async def make() -> None:
        store = await Store.open(default)
        await store.close()

    asyncio.run(make())
    os.utime(default, (1_800_000_000, 1_800_000_000))
    demo = demo_dir(now=1_800_000_600) / STORE_FILE
    demo.write_bytes(b"")
    os.utime(demo, (1_800_000_600, 1_800_000_600))
    assert main(args) == 0
    err = capsys.readouterr().err
    assert f"nothing in {default} since" in err
    assert f"a newer demo run's store is {demo}: pass --db {demo}." in err


def test_a_demo_store_written_through_its_wal_counts_as_new(capsys):
    """A demo run's store is written through its ``-wal`` file: the database file keeps its
    creation time until a checkpoint, and a stale store at the default path hid the demo run
    that had just ended (a newcomer's run), the more so as ``events`` opening the stale store
    made it the newest written."""
    import asyncio
    import time

    from fleetdeck.console.store import Store
    from fleetdeck.paths import state_base

    default = state_base() / "demo.db"

    async def make() -> None:
        store = await Store.open(default)
        await store.close()

    asyncio.run(make())
    now = time.time()
    os.utime(default, (now - 3600, now - 3600))  # an hour-old collector's store
    demo = demo_dir(now=now - 300) / STORE_FILE
    demo.write_bytes(b"")
    os.utime(demo, (now - 7200, now - 7200))  # created before it...
    wal = demo.with_name(demo.name + "-wal")
    wal.write_bytes(b"")
    os.utime(wal, (now - 60, now - 60))  # ...and written a minute ago
    for _ in range(2):  # and again: a reader's own open must not make it the newest
        assert main(["events"]) == 0
        assert f"a newer demo run's store is {demo}: pass --db {demo}." in \
            capsys.readouterr().err


@pytest.mark.parametrize("content", [b"", b"\x1f\x8b\x08 a recording, not a store"],
                         ids=["empty", "recording"])
@pytest.mark.parametrize("args", [["events"], ["history", "gpu0001"], ["report"]])
def test_a_reader_never_turns_a_file_into_a_store(args, content, tmp_path, capsys):
    """``events --db e.jsonl.gz`` on an empty file said "nothing in it" and left a 90 KB
    SQLite database there (a newcomer's run)."""
    path = tmp_path / "e.jsonl.gz"
    path.write_bytes(content)
    assert main([*args, "--db", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path} is not a history store" in err
    assert path.read_bytes() == content


def test_no_store_names_a_second_consoles_store_in_a_demo_run(capsys):
    """A second console against a running demo keeps its store in the demo's folder
    (``console-<pid>-<cluster>.db``, fleetdeck/cli.py): 'events' named only the demo's own."""
    run = demo_dir(now=1_800_000_000)
    (run / STORE_FILE).write_bytes(b"")
    second = run / "console-4242-demo.db"
    second.write_bytes(b"")
    os.utime(run / STORE_FILE, (1_800_000_000, 1_800_000_000))
    os.utime(second, (1_800_000_100, 1_800_000_100))
    assert main(["events"]) == 2
    err = capsys.readouterr().err
    assert f"the newest demo run's store is {second} (1 older demo store(s) beside it)" in err
