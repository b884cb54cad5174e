"""console/node_history.py: the series node detail charts, the spans, thinning and the time
cursor, from rows a real store returns (no Textual)."""

import pytest

from fleetdeck.console.node_history import (
    BY_KEY,
    CHARTS,
    SPANS,
    Cursor,
    build,
    load,
    next_span,
    short_labels,
    thin,
    time_ticks,
)
from fleetdeck.console.store import Store, TickRows

NOW = 1_767_225_600.0 + 30  # half a minute into a minute
LAST = int(NOW // 60)


def tick_rows(node: str, minutes: range, gaps: set[int] = frozenset()) -> TickRows:
    gpu, ports = [], []
    for m in minutes:
        if m in gaps:
            continue
        for g in range(2):
            gpu.append((node, g, m, 60, 50.0, 60.0 + g + (m - LAST), 300.0, 1500.0 - g, 1))
        ports.append((node, "mlx5_0", m, 60, 1e10, 2e10, 7 if m == LAST - 3 else 0, 0, 0))
    return TickRows(gpu=gpu, ports=ports)


@pytest.fixture
async def store(tmp_path):
    s = await Store.open(tmp_path / "h.db")
    await s.write_rows(tick_rows("gpu0001", range(LAST - 120, LAST), gaps={LAST - 4}))
    await s.write_rows(tick_rows("gpu0002", range(LAST - 120, LAST)))  # must not leak in
    yield s
    await s.close()


async def test_load_reads_the_node_and_span_only(store):
    hist = await load(store, "gpu0001", SPANS[0], NOW)
    assert hist.first == LAST - 15 and hist.last == LAST
    assert hist.minutes == [m for m in range(LAST - 15, LAST) if m != LAST - 4]
    assert hist.labels("temp") == ["gpu0", "gpu1"]
    assert hist.labels("ib_tx") == ["mlx5_0"]
    assert set(hist.charts) == {c.key for c in CHARTS}
    # Values come scaled as the chart says: Gb/s, as IB link rates are, not B/s.
    assert hist.value("ib_rx", "mlx5_0", LAST - 1) == pytest.approx(160.0)
    assert hist.value("temp", "gpu1", LAST - 2) == pytest.approx(59.0)
    assert hist.value("ib_symbol", "mlx5_0", LAST - 3) == 7
    assert hist.value("temp", "gpu1", LAST - 4) is None  # the gap
    longer = await load(store, "gpu0001", SPANS[1], NOW)
    assert len(longer.minutes) == 59 and longer.first == LAST - 60


async def test_history_queries_match_a_plain_scan(store):
    """The index-seeking query returns what the obvious one would, in the same order."""
    since = (LAST - 10) * 60
    got = await store.gpu_history("gpu0001", since)
    async with store.db.execute(
            "SELECT gpu, minute FROM gpu_minutes WHERE node = ? AND minute >= ? "
            "ORDER BY minute, gpu", ("gpu0001", LAST - 10)) as cur:
        want = await cur.fetchall()
    assert [(r["gpu"], r["minute"]) for r in got] == [tuple(r) for r in want]
    ports = await store.port_history("gpu0001", since)
    assert [r["minute"] for r in ports] == [m for m in range(LAST - 10, LAST) if m != LAST - 4]
    assert await store.gpu_history("nope", 0) == []


def test_empty_history_and_cursor():
    hist = build("gpu0001", SPANS[0], NOW, [], [])
    assert hist.empty
    cursor = Cursor()
    assert cursor.where(hist) is None
    cursor.move(hist, -1)
    assert cursor.following


async def test_cursor_walks_minutes_with_data_and_follows_the_newest(store):
    hist = await load(store, "gpu0001", SPANS[0], NOW)
    cursor = Cursor()
    assert cursor.following and cursor.where(hist) == LAST - 1
    cursor.move(hist, -2)
    assert cursor.where(hist) == LAST - 3
    cursor.move(hist, -1)  # LAST - 4 has no rows: the cursor skips it
    assert cursor.where(hist) == LAST - 5
    assert hist.at(LAST - 5)["temp"] == {"gpu0": 55.0, "gpu1": 56.0}
    cursor.move(hist, -100)
    assert cursor.where(hist) == hist.minutes[0]
    cursor.move(hist, 100)
    assert cursor.following
    # A minute that left the data (a shorter span, a gap) reads the one before it.
    assert Cursor(LAST - 4).where(hist) == LAST - 5
    assert Cursor(LAST - 500).where(hist) == hist.minutes[0]
    cursor.oldest(hist)
    assert cursor.where(hist) == hist.minutes[0]
    cursor.newest()
    assert cursor.following


def test_spans_cycle():
    assert [s.label for s in SPANS] == ["15 min", "1 h", "24 h"]
    assert next_span(SPANS[0]) == SPANS[1]
    assert next_span(SPANS[-1]) == SPANS[0]


def test_thin_keeps_the_bad_direction():
    pts = [(m, float(m % 10)) for m in range(1440)]
    hot = thin(pts, 0, 1440, 144, "max")
    assert len(hot) == 144 and all(v == 9.0 for _m, v in hot)
    slow = thin(pts, 0, 1440, 144, "min")
    assert all(v == 0.0 for _m, v in slow)
    mean = thin(pts, 0, 1440, 144, "mean")
    assert all(v == pytest.approx(4.5) for _m, v in mean)
    assert [m for m, _v in hot] == list(range(0, 1440, 10))
    assert thin(pts[:50], 0, 1440, 144, "max") == pts[:50]  # already fits: untouched


def test_short_labels_and_ticks():
    assert short_labels(["gpu0", "gpu1", "gpu10"]) == {"gpu0": "0", "gpu1": "1", "gpu10": "10"}
    assert short_labels(["gpu10", "gpu11"]) == {"gpu10": "10", "gpu11": "11"}
    assert short_labels(["mlx5_ib0", "mlx5_ib7"]) == {"mlx5_ib0": "0", "mlx5_ib7": "7"}
    assert short_labels(["ib", "ib2"]) == {"ib": "ib", "ib2": "ib2"}
    assert short_labels(["mlx5_0"]) == {"mlx5_0": "mlx5_0"}
    ticks = time_ticks(LAST - 60, LAST, 5)
    assert [t for t, _ in ticks] == [0, 15, 30, 45, 60]
    assert len({label for _, label in ticks}) == 5


def test_chart_text_and_counters():
    # IB in Gb/s, as the live port table prints it (rows.gbit_text).
    assert BY_KEY["ib_tx"].text(123.45) == "123" and BY_KEY["ib_tx"].text(7.54) == "7.5"
    assert BY_KEY["ib_tx"].text(0.01) == "<0.1" and BY_KEY["ib_tx"].unit == "Gb/s"
    assert BY_KEY["temp"].text(None) == "-"
    assert BY_KEY["ib_symbol"].counter and not BY_KEY["power"].counter


def test_port_labels_with_a_number_inside_sort_as_numbers():
    """A port named by its PCI slot (``ibp9s0``, ``ibp12s0``: a systemd-renamed HCA) sorted by
    its last digits alone, the rest as text: ibp12s0 came before ibp9s0. The hostlist's
    ``natural_key``, the one the node and leaf lists sort by, reads every number."""
    from fleetdeck.console.node_history import series

    rows = [{"minute": LAST, "dev": dev, "xmit_Bps": 1e9}
            for dev in ("ibp12s0", "ibp9s0", "ibp10s0")]
    assert list(series(rows, BY_KEY["ib_tx"])) == ["ibp9s0", "ibp10s0", "ibp12s0"]
