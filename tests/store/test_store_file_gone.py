"""The store's file deleted, or overwritten, under a running collector (a 2026-12-07 drill, on a
TUI console: `rm` of its --db, then random bytes copied over it). SQLite wrote on into the file
it had open: nothing was said, and every row written after the `rm` was lost with the process
(the header clear, `events --db` "no store"). Now the collector says so in one sentence on its
log, the console's header reads NO HISTORY with the sentence in its timeline."""

import asyncio
import os
import threading
import time
from pathlib import Path

import pytest

from fleetdeck.console import store_link as store_link_mod
from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.store import CONSOLE_SOURCE, Store
from fleetdeck.protocol.topics import Kind
from tests.conftest import spawn, stop_process
from tests.helpers import FakeNode

CLUSTER = "gone"


def _said(log: Path, words: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        if words in text:
            return text
        time.sleep(0.25)
    raise AssertionError(f"not said within {timeout} s: {words!r}\n{log.read_text()}")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["deleted", "overwritten"])
def test_a_collector_says_its_store_file_is_gone(mosquitto, tmp_path, how) -> None:
    db = tmp_path / "c.db"
    sim = spawn("sim", "--broker", str(mosquitto.url), "--cluster", CLUSTER, "--nodes", "4",
                "--interval", "1.0", log=tmp_path / "sim.log")
    log = tmp_path / "collect.log"
    col = spawn("collect", "--broker", str(mosquitto.url), "--cluster", CLUSTER, "--db", str(db),
                log=log)
    try:
        deadline = time.monotonic() + 30
        while not (db.exists() and db.stat().st_size > 0) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(3)
        assert "history store" not in log.read_text()
        if how == "deleted":
            db.unlink()
        else:
            with open(db, "r+b") as f:  # as `cp garbage c.db` does: the same inode
                f.write(b"\x8f" * 4096)
        text = _said(log, f"history store {db} was {how}", 20)
        assert "restart to keep history in a new store" in text, text
        assert col.poll() is None  # it goes on: the live side still serves its metrics
    finally:
        stop_process(col)
        stop_process(sim)


async def _console_with_a_store(db: Path) -> "tuple[FakeNode, ConsoleSession]":
    node = FakeNode(cluster=CLUSTER)
    session = ConsoleSession(CLUSTER, clock=lambda: node.now)
    await session.open_store(db)
    node.feed(session.ingest, node.birth(), Kind.BIRTH)
    session.tick()
    await session.flush()
    return node, session


async def _kept(db: Path) -> list[str]:
    store = await Store.open(db)
    rows = await store.events(0)
    await store.close()
    return [r["message"] for r in rows if r["node"] == CONSOLE_SOURCE and r["kind"] == "store"]


async def test_a_store_file_that_does_not_answer_a_stat_is_said_once_not_waited_on(
        tmp_path, monkeypatch) -> None:
    """The store-file check (a stat and a header read every 5 s) ran on the event loop: a
    hung NFS mount under the store stalled the whole console there. It runs off the loop now,
    and a check unanswered for ``STORE_FILE_HUNG_S`` is said once, kept in the store."""
    monkeypatch.setattr(store_link_mod, "STORE_FILE_CHECK_S", 0.0)
    monkeypatch.setattr(store_link_mod, "STORE_FILE_HUNG_S", 0.3, raising=False)
    db = tmp_path / "hung.db"
    node, session = await _console_with_a_store(db)
    hung = threading.Event()
    looks: list[str] = []
    real_gone = Store.gone

    def hanging_gone(store: Store) -> str:
        looks.append(threading.current_thread().name)
        hung.wait(5.0)  # a stat on a hung mount; bounded so the test ends if it runs inline
        return real_gone(store)

    monkeypatch.setattr(Store, "gone", hanging_gone)
    try:
        t0 = time.monotonic()
        for _ in range(4):
            node.now += 0.5
            session.tick()
            await session.flush()
            await asyncio.sleep(0.15)
        assert time.monotonic() - t0 < 2.0, "the console waited on the check"
        assert looks == ["store-file-check"], looks  # one look at a time, off the loop
        said = [line.text for line in session.log.lines() if line.kind == "store"]
        assert said == [f"history store {db}: the store's file did not answer a stat for "
                        "0.3 s (a hung network mount?); the console goes on, and looks again "
                        "once it answers"], said
        assert "history" not in session.problems
    finally:
        hung.set()
    await asyncio.sleep(0.1)
    node.now += 0.5
    session.tick()
    await session.flush()
    said = [line.text for line in session.log.lines() if line.kind == "store"]
    assert len(said) == 2 and "answered again after" in said[1], said
    assert "history" not in session.problems  # the file was there all along
    node.now += 0.5
    session.tick()
    await session.flush()
    await session.close()
    kept = await _kept(db)
    assert len(kept) == 2 and "did not answer a stat" in kept[0], kept


async def test_a_store_moved_aside_keeps_why_its_rows_stop(tmp_path, monkeypatch) -> None:
    """The sentence is kept as the store's failing writes are: into the file this console
    writes, where a store moved aside tells why its history stops."""
    monkeypatch.setattr(store_link_mod, "STORE_FILE_CHECK_S", 0.0)
    db = tmp_path / "moved.db"
    node, session = await _console_with_a_store(db)
    aside = tmp_path / "aside.db"
    # With its WAL, where SQLite keeps what it has not checkpointed into the database yet.
    for suffix in ("", "-wal"):
        os.rename(f"{db}{suffix}", f"{aside}{suffix}")
    for _ in range(20):
        node.now += 0.5
        session.tick()
        await session.flush()
        if "history" in session.problems:
            break
        await asyncio.sleep(0.05)
    assert "history" in session.problems, session.problems
    await session.close()
    kept = await _kept(aside)
    assert len(kept) == 1 and f"history store {db} was deleted while in use" in kept[0], kept


async def test_a_store_closed_under_a_look_is_not_read_through_a_reused_descriptor(
        tmp_path, monkeypatch) -> None:
    """The look (a thread) reads the header through the store's own descriptor, which
    ``close`` closed under it (a console's exit, a look started by its last flush): the number
    went to the next file opened, and the look read that file's bytes as the store's header,
    "overwritten". The look closes it now, after its read, and a closed store answers ''."""
    db = tmp_path / "closing.db"
    store = await Store.open(db)
    head = store._head_fd
    assert head is not None
    reading, release = threading.Event(), threading.Event()
    real_pread = os.pread

    def slow_pread(fd: int, n: int, offset: int) -> bytes:
        reading.set()
        release.wait(5.0)
        return real_pread(fd, n, offset)

    monkeypatch.setattr(os, "pread", slow_pread)
    look = store.look_gone()
    assert await asyncio.to_thread(reading.wait, 5.0)
    await store.close()
    other = tmp_path / "other.log"
    other.write_bytes(b"not a database, another file of this process's\n" * 4)
    opened = []
    try:
        # Whatever SQLite's close freed first: until the store's number comes up, or it is
        # not free (it must not be).
        for _ in range(16):
            opened.append(os.open(other, os.O_RDONLY))
            if opened[-1] == head:
                break
        release.set()
        answer = await asyncio.wrap_future(look)
    finally:
        release.set()
        for fd in opened:
            os.close(fd)
    assert answer == "", answer
    assert head not in opened
    assert store._head_closing is None and store._head_readers == 0
    with pytest.raises(OSError):
        os.fstat(head)  # closed by the look, not left open


async def test_a_store_opened_again_is_not_judged_by_the_closed_ones_look(
        tmp_path, monkeypatch) -> None:
    """A look in flight when the session's store closed stayed the session's: a store opened
    after in the same session was never looked at (the old look still hung) and its answer,
    when it came, was taken for the new store's."""
    monkeypatch.setattr(store_link_mod, "STORE_FILE_CHECK_S", 0.0)
    monkeypatch.setattr(store_link_mod, "STORE_FILE_HUNG_S", 0.2, raising=False)
    node, session = await _console_with_a_store(tmp_path / "first.db")
    hung = threading.Event()
    real_gone = Store.gone
    looked: list[Path] = []

    def gone(store: Store) -> str:
        looked.append(store.path)
        if store.path.name == "first.db":
            hung.wait(5.0)
            return f"history store {store.path} was replaced by another file while in use"
        return real_gone(store)

    monkeypatch.setattr(Store, "gone", gone)
    try:
        for _ in range(3):
            node.now += 0.5
            session.tick()
            await session.flush()
            await asyncio.sleep(0.15)
        await session.close()
        await session.open_store(tmp_path / "second.db")
        hung.set()
        await asyncio.sleep(0.1)
        for _ in range(3):
            node.now += 0.5
            session.tick()
            await session.flush()
            await asyncio.sleep(0.05)
    finally:
        hung.set()
    assert looked[-1] == tmp_path / "second.db", looked
    assert "history" not in session.problems, session.problems
    said = [line.text for line in session.log.lines() if line.kind == "store"]
    assert not any("answered again" in text for text in said), said
    await session.close()
