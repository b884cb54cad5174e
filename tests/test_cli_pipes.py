"""A reader that goes away early (``fleetdeck schema | head -1``) ends the CLI quietly, as
Unix tools do: no BrokenPipeError traceback, no "Exception ignored" at exit. The real CLI, its
stdout a pipe whose reading end is closed before it writes."""

import asyncio
import os
import subprocess

import pytest

from fleetdeck.cli import EXIT_CLOSED_PIPE
from fleetdeck.console.store import Store
from tests.conftest import REPO, fleetdeck_cmd


def closed_stdout(*args: str) -> tuple[int, str]:
    """Run with stdout a pipe nobody reads: every write to it fails with EPIPE."""
    read, write = os.pipe()
    os.close(read)
    try:
        res = subprocess.run(fleetdeck_cmd(*args), stdout=write, stderr=subprocess.PIPE,
                             text=True, timeout=60, cwd=REPO, check=False)
    finally:
        os.close(write)
    return res.returncode, res.stderr


async def _empty_store(path) -> None:
    await (await Store.open(path)).close()


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "s.db"
    asyncio.run(_empty_store(path))
    return str(path)


@pytest.mark.parametrize(("args", "code"), [
    (("schema",), EXIT_CLOSED_PIPE),
    (("events", "--json", "--db", "{db}"), EXIT_CLOSED_PIPE),
    (("report", "--json", "--db", "{db}"), EXIT_CLOSED_PIPE),
    (("replay", str(REPO / "fixtures" / "thermal.jsonl.gz"), "--headless", "--summary-json"),
     EXIT_CLOSED_PIPE),
    # rich handles a closed pipe itself (devnull, then exit 1); argparse ignores it (exit 0).
    (("report", "--db", "{db}"), 1),
    (("--help",), 0),
])
def test_a_closed_stdout_ends_quietly(args, code, db):
    got, err = closed_stdout(*(a.replace("{db}", db) for a in args))
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception" not in err, err
    assert got == code
