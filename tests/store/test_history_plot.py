"""``fleetdeck history NODE --plot``: the store's history drawn in the terminal (plotext)."""

import json
import re
import time

import pytest

from fleetdeck.console.cli.plot import render, series
from fleetdeck.console.rows import ib_throughput_text
from fleetdeck.console.store import Store
from tests.conftest import run_cli, spawn, stop_process
from tests.store.test_store import fill


async def _db(tmp_path, seconds: int = 300):
    db = tmp_path / "h.db"
    store = await Store.open(db)
    try:
        await fill(store, seconds=seconds)
        gpus = await store.gpu_history("gpu0001", 0)
        ports = await store.port_history("gpu0001", 0)
    finally:
        await store.close()
    return db, gpus, ports


async def test_series_follow_the_stores_minutes_per_gpu_and_port(tmp_path):
    _db_path, gpus, ports = await _db(tmp_path)
    temps = series(gpus, "temp")
    assert list(temps) == [f"gpu{i}" for i in range(8)]
    minutes = sorted({r["minute"] for r in gpus})
    assert [m for m, _v in temps["gpu3"]] == minutes
    want = {r["minute"]: r["temp_max"] for r in gpus if r["gpu"] == 3}
    assert all(v == want[m] for m, v in temps["gpu3"])
    ib = series(ports, "ib")
    assert list(ib) == [f"mlx5_ib{i}" for i in range(8)]
    assert all(v <= 400 for pts in ib.values() for _m, v in pts)  # Gb/s, not B/s


async def test_plot_draws_axes_labels_and_one_marker_per_series_without_colour(tmp_path):
    _db_path, gpus, _ports = await _db(tmp_path)
    text = render(gpus, "gpu0001", "temp", width=100, height=24, color=False)
    assert "\x1b[" not in text
    assert "gpu0001 temp per minute (UTC)" in text
    for i in range(8):
        assert f"gpu{i}" in text  # the legend
    assert re.search(r"\d\d:\d\d", text)  # time ticks
    assert 12 <= len(text.splitlines()) <= 24
    assert max(len(line) for line in text.splitlines()) <= 100


async def test_history_plot_from_the_cli(tmp_path):
    db, _gpus, _ports = await _db(tmp_path)
    res = run_cli("history", "gpu0001", "--db", str(db), "--since", "1970-01-01T00:00", "--metric",
                  "power", "--plot")
    assert res.returncode == 0, res.stderr
    assert "gpu0001 power per minute (UTC)" in res.stdout and "W" in res.stdout
    both = run_cli("history", "gpu0001", "--db", str(db), "--plot", "--json")
    assert both.returncode == 2 and "not allowed with" in both.stderr


@pytest.mark.timeout(180)
def test_history_says_how_each_minute_is_aggregated(mosquitto, tmp_path):
    """``--metric clock`` shows each minute's lowest SM clock: the table said nothing of it
    (a throttled second read as a throttled minute), nor did the JSON."""
    db = tmp_path / "c.db"
    url = str(mosquitto.url)
    sim = spawn("sim", "--broker", url, "--cluster", "hist", "--nodes", "1", "--jobs", "0",
                "--interval", "0.5", log=tmp_path / "sim.log")
    col = spawn("collect", "--broker", url, "--cluster", "hist", "--db", str(db),
                log=tmp_path / "collect.log")
    try:
        deadline = time.monotonic() + 30
        while "caught up" not in (tmp_path / "collect.log").read_text():
            assert time.monotonic() < deadline, (tmp_path / "collect.log").read_text()
            time.sleep(0.2)
        # A minute is written once a sample of the next one arrives: cross a minute boundary.
        time.sleep(60 - time.time() % 60 + 3)
    finally:
        assert stop_process(col) == 0
        stop_process(sim)
    want = {"clock": ("SM clock (MHz): the minimum", "sm_clock_min", "min"),
            "temp": ("temperature (°C): the maximum", "temp_max", "max"),
            "util": ("utilisation (%): the mean", "util", "mean"),
            "ib": ("IB transmit (Gb/s): the mean", "xmit_Bps", "mean")}
    for metric, (words, column, how) in want.items():
        res = run_cli("history", "gpu0001", "--db", str(db), "--metric", metric)
        assert res.returncode == 0, res.stderr
        assert words in res.stdout.splitlines()[0], res.stdout
        res = run_cli("history", "gpu0001", "--db", str(db), "--metric", metric, "--json")
        rows = json.loads(res.stdout)
        assert rows and all(r["metric"] == column and r["aggregation"] == how for r in rows)
        assert all(column in r for r in rows)


async def test_ib_history_table_is_in_gbits(tmp_path):
    db, _gpus, ports = await _db(tmp_path)
    res = run_cli("history", "gpu0001", "--db", str(db), "--since", "1970-01-01T00:00",
                  "--metric", "ib")
    assert res.returncode == 0, res.stderr
    assert "Gb/s" in res.stdout and "GB/s" not in res.stdout
    row = next(r for r in ports if r["dev"] == "mlx5_ib0" and r["xmit_Bps"])
    assert f" {ib_throughput_text(row['xmit_Bps'])} " in res.stdout
    plot = render(ports, "gpu0001", "ib", width=100, height=24, color=False)
    assert "Gb/s transmitted" in plot


async def test_history_of_a_node_the_store_never_saw_is_one_sentence(tmp_path):
    """A mistyped node printed "no history for gpu9999 since …" and exit 0, as a quiet node."""
    db, _gpus, _ports = await _db(tmp_path)
    res = run_cli("history", "gpu9999", "--db", str(db))
    assert res.returncode == 2
    assert res.stdout == ""
    assert res.stderr.strip().splitlines() == [
        f"fleetdeck history: the store {db} holds no minute of a node named 'gpu9999': "
        "mistyped, or a node of another --cluster or --db."]
    # A known node whose window is empty is no error: it says so and exits 0.
    quiet = run_cli("history", "gpu0001", "--db", str(db), "--since", "2099-01-01T00:00")
    assert quiet.returncode == 0 and "no history for gpu0001 since" in quiet.stdout


async def test_a_node_typed_without_its_zero_padding_is_named_by_history_and_events(tmp_path):
    """`history gpu1` and `events --node gpu1` for gpu0001 (a tired operator at 3 a.m.) read
    "mistyped, or a node of another --cluster or --db": the node to type is in the store."""
    db, _gpus, _ports = await _db(tmp_path)
    res = run_cli("history", "gpu1", "--db", str(db))
    assert (res.returncode, res.stderr) == (2, f"fleetdeck history: the store {db} holds no "
                                            "minute of a node named 'gpu1': did you mean "
                                            "gpu0001?\n")
    res = run_cli("events", "--node", "GPU0001", "--db", str(db))
    assert (res.returncode, res.stderr) == (2, f"fleetdeck events: the store {db} holds nothing "
                                            "of GPU0001: did you mean gpu0001?\n")


async def test_history_of_a_name_with_two_padded_twins_in_the_store_names_both(tmp_path):
    """A store of gpu0001 and gpu00001 (two racks' schemes): 'history gpu1' named gpu0001
    alone, the first form tried, and 'events --node gpu1' both."""
    db, _gpus, _ports = await _db(tmp_path, seconds=130)
    store = await Store.open(db)
    try:
        await fill(store, seconds=70, node_id="gpu00001")
    finally:
        await store.close()
    res = run_cli("history", "gpu1", "--db", str(db))
    assert res.returncode == 2, res.stderr
    assert res.stderr.endswith("did you mean gpu00001,gpu0001?\n"), res.stderr


async def test_history_of_a_node_heard_but_no_minute_over_yet_says_so_not_mistyped(tmp_path):
    """The README's step by step: `collect &`, then `history gpu0012` a minute later read
    "holds no minute of a node named 'gpu0012': mistyped" while the store held its events and
    its verdict (a newcomer run): a minute is written only once it is over."""
    from fleetdeck.console.store import TickRows

    db = tmp_path / "young.db"
    store = await Store.open(db)
    try:
        # What a collector's first tick writes: each node's first verdict, no minute yet.
        await store.write_rows(TickRows(transitions=[(time.time(), "gpu0012", None, "ok", "", 0)]))
    finally:
        await store.close()
    for extra in ((), ("--metric", "ib"), ("--json",), ("--plot",)):
        res = run_cli("history", "gpu0012", "--db", str(db), *extra)
        assert res.returncode == 2, res.stdout + res.stderr
        said = res.stderr.strip()
        assert said == (f"fleetdeck history: the store {db} holds no minute of gpu0012 yet, "
                        "though it has heard of it: a minute is written once it is over (a "
                        "collector or console started a minute ago has none yet); try again "
                        "in a minute."), said
    typo = run_cli("history", "gpu0021", "--db", str(db))
    assert typo.returncode == 2 and "mistyped" in typo.stderr, typo.stderr


async def test_missing_minutes_show_as_a_gap_not_as_a_continuous_table(tmp_path):
    """A collector killed mid-run left 16:51 followed by 16:53 in a table that read as
    continuous (an SRE drill): the missing minutes are one "no data" row."""
    db, gpus, _ports = await _db(tmp_path, seconds=600)
    minutes = sorted({r["minute"] for r in gpus})
    assert len(minutes) >= 6
    drop = minutes[2:4]
    import sqlite3

    with sqlite3.connect(db) as con:
        con.executemany("DELETE FROM gpu_minutes WHERE minute = ?", [(m,) for m in drop])
        con.executemany("DELETE FROM port_minutes WHERE minute = ?", [(m,) for m in drop])
    for metric in ("util", "temp"):  # (the IB table wraps at the tests' 80 columns)
        res = run_cli("history", "gpu0001", "--db", str(db), "--since", "1970-01-01T00:00",
                      "--metric", metric)
        assert res.returncode == 0, res.stderr
        lines = res.stdout.splitlines()
        gaps = [ln for ln in lines if "no data" in ln]
        assert len(gaps) == 1, lines
        assert gaps[0].startswith(time.strftime("%Y-%m-%dT%H:%M", time.gmtime(drop[0] * 60)))
