"""The two subscriber processes of bench/ingest.py: a bare aiomqtt subscriber and the real console.

Both are children of the benchmark, subscribed to the same broker at the same time, so the
parent can read each one's CPU from /proc. They talk to the parent in lines: they print
``READY`` once subscribed (the console also ``BORN <n>`` while births arrive) and read ``GO
<epoch> <seconds>`` (the stream starts) and ``END <sent>`` (the stream ended, ``sent`` telemetry
messages went out) on stdin; at the end each prints one JSON line and exits 0.

The console is the real thing driven headless: ``FleetdeckApp`` (``connect=True``, its own
``ConsoleSession`` with a ``LiveFeed``, ticking every 0.5 s on its own timer) under Textual's
``run_test``. The benchmark only watches it:

* ``TimedIngest`` notes the sample time of every telemetry message it stores (all of them,
  superseded ones too), so each sample's lag is measured, not only the newest per node;
* ``BenchApp.tick`` notes when the tick that took a sample had applied it, and ``_display`` when
  the screen that followed was painted (headless Textual skips writing to a terminal, so the
  benchmark encodes the update to terminal bytes as a real terminal would need, and drops it);
* keys are posted to the app's driver exactly as ``Pilot.press`` posts them, and timed to the
  first paint that shows their effect (the cursor moved, or the new view refreshed and painted).
  Pilot's own wait after a key (until the process is idle, up to 1 s, twice) never ends early
  while the console is ingesting, so it cannot time keys under load;
* a probe task sleeps 10 ms in a loop and records how much longer it slept: the event loop's
  stalls, which delay keys, ticks and MQTT reads alike.
"""

import asyncio
import contextlib
import json
import logging
import math
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from textual import events
from textual._compositor import CompositorUpdate

from fleetdeck.brokerurl import BrokerURL, make_client
from fleetdeck.console.audit import MemoryAudit
from fleetdeck.console.ingest import Batch, Ingest
from fleetdeck.console.live import MAX_QUEUED_INCOMING
from fleetdeck.console.session import TickReport
from fleetdeck.console.tui import app as tui_app
from fleetdeck.console.tui.app import FleetdeckApp
from fleetdeck.protocol.topics import subscriptions
from fleetdeck.runtime import tune_gc

KEY_TIMEOUT_S = 10.0
"""A key whose effect is not on screen after this long counts as this long."""


def say(line: str) -> None:
    """To the parent, past Textual (which captures sys.stdout while an app runs)."""
    os.write(1, (line + "\n").encode())


class Commands:
    """Lines from the parent on stdin, read on a thread."""

    def __init__(self) -> None:
        self.q: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in sys.stdin:
            self.q.put(line.strip())
        self.q.put("EOF")

    async def next(self, want: str) -> list[str]:
        while True:
            try:
                line = self.q.get_nowait()
            except queue.Empty:
                await asyncio.sleep(0.05)
                continue
            if line == "EOF":
                raise SystemExit(f"parent went away while waiting for {want}")
            words = line.split()
            if words and words[0] == want:
                return words[1:]


class Discards(logging.Handler):
    """Counts the messages aiomqtt drops because its incoming queue is full (it logs each)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0
        logging.getLogger("mqtt").addHandler(self)
        logging.getLogger("mqtt").propagate = False  # one line per dropped message otherwise

    def emit(self, record: logging.LogRecord) -> None:
        if "queue is full" in record.getMessage():
            self.count += 1


LOOP = "loop: "
"""The stall file's prefix of an event-loop callback's name (the rest are ``time_calls``'s,
which run inside one)."""


class LoopProbe:
    """Sleeps 10 ms in a loop; each oversleep is a stall of the event loop.

    Each beat also notes the CPU time the loop's thread spent meanwhile (``cpu_samples``,
    ``time.thread_time``): on a machine whose other tenants take the cores, a wall oversleep
    includes waiting for a CPU, while the thread's own CPU time is what the console's code
    held the loop for (docs/performance.md compares both).

    With ``FLEETDECK_BENCH_STALLS=FILE`` in the environment a watchdog thread also samples the
    loop thread's stack every 2 ms while the probe is late, notes cyclic GC runs
    (generation, ms), and writes every stall over 40 ms with its samples to FILE as JSON: where
    a stall came from, which the oversleep alone cannot say."""

    STALL_S = 0.04

    def __init__(self) -> None:
        self.samples: list[tuple[float, float]] = []
        self.cpu_samples: list[float] = []
        """Per beat: the loop thread's CPU time beyond the 10 ms sleep (0 if less)."""
        self._task: asyncio.Task[None] | None = None
        self._stacks_to = self.stalls_file = os.environ.get("FLEETDECK_BENCH_STALLS")
        self._beat = time.perf_counter()
        self._stacks: list[tuple[float, list[str]]] = []
        self._gcs: list[tuple[float, int, float]] = []
        self._gc_t0 = 0.0
        self._watching = False
        self._calls: list[tuple[float, str, float, float]] = []
        """(perf_counter at the start, name, CPU s, wall s) of each timed call; an event-loop
        callback's name is prefixed with ``LOOP``."""
        self._t_start = 0.0
        self._untime: Callable[[], None] = lambda: None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())
        self._t_start = time.perf_counter()
        if self._stacks_to:
            import gc

            self._watching = True
            self._time_callbacks()
            gc.callbacks.append(self._on_gc)
            threading.Thread(target=self._watch, args=(threading.get_ident(),),
                             daemon=True).start()

    async def _run(self) -> None:
        while True:
            t0 = time.perf_counter()
            c0 = time.thread_time()
            self._beat = t0
            await asyncio.sleep(0.01)
            t1 = time.perf_counter()
            self.samples.append((time.time(), t1 - t0 - 0.01))
            self.cpu_samples.append(max(0.0, time.thread_time() - c0 - 0.01))

    def _time_callbacks(self) -> None:
        """Each event-loop callback's CPU time, with its name, for the stall file: which of the
        callbacks run between two beats held the loop (asyncio's own slow-callback log times
        the wall, which on a shared machine includes waiting for a core)."""
        handle = asyncio.events.Handle
        run = handle._run
        calls = self._calls

        def timed(h: Any) -> None:
            p0, c0 = time.perf_counter(), time.thread_time()
            run(h)
            spent = time.thread_time() - c0
            if spent >= 0.002:
                cb = h._callback
                owner = getattr(cb, "__self__", None)
                if isinstance(owner, asyncio.Task):
                    name = f"task {owner.get_coro().__qualname__}"  # type: ignore[union-attr]
                else:
                    name = getattr(cb, "__qualname__", type(cb).__name__)
                calls.append((p0, LOOP + name, spent, time.perf_counter() - p0))

        handle._run = timed  # type: ignore[method-assign,assignment]
        self._untime = lambda: setattr(handle, "_run", run)

    def time_console_calls(self, app: Any) -> None:
        """``time_calls`` of what a console's long loop steps are made of (the tick, apply and
        judge, the views' refresh, Textual's layout and compositor), for ``app``'s class."""
        from textual.screen import Screen

        from fleetdeck.console.session import ConsoleSession
        from fleetdeck.console.state import FleetState
        from fleetdeck.console.tui.screens.base import FleetView

        self.time_calls(ConsoleSession, "tick")
        self.time_calls(FleetState, "apply", "judge_fleet")
        self.time_calls(type(app), "refresh_view", "switch_mode", "_display")
        self.time_calls(FleetView, "refresh_view")
        self.time_calls(Screen, "_compositor_refresh", "_refresh_layout")

    def time_calls(self, owner: Any, *names: str) -> None:
        """Also note the CPU time of these methods of ``owner`` (a class or an object) in the
        stall file, as ``Owner.name``: what a long callback was made of."""
        calls = self._calls
        label = getattr(owner, "__name__", type(owner).__name__)
        for name in names:
            method = getattr(owner, name)

            def timed(*args: Any, _m: Any = method, _n: str = f"{label}.{name}",
                      **kw: Any) -> Any:
                p0, c0 = time.perf_counter(), time.thread_time()
                try:
                    return _m(*args, **kw)
                finally:
                    spent = time.thread_time() - c0
                    if spent >= 0.002:
                        calls.append((p0, _n, spent, time.perf_counter() - p0))

            setattr(owner, name, timed)

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_t0 = time.perf_counter()
        else:
            self._gcs.append((self._gc_t0, info["generation"], time.perf_counter() - self._gc_t0))

    def _watch(self, loop_thread: int) -> None:
        import traceback

        while self._watching:
            time.sleep(0.002)
            now = time.perf_counter()
            if now - self._beat > 0.012:  # the loop is late: keep what it is doing
                frame = sys._current_frames().get(loop_thread)
                if frame is not None:
                    lines = [f"{Path(f.filename).name}:{f.lineno} {f.name}"
                             for f in traceback.extract_stack(frame)[-40:]]
                    self._stacks.append((now, lines))

    def stop(self, keys: Sequence[tuple[str, float, float]] = ()) -> None:
        """``keys``: (key, perf_counter posted, seconds to the screen) of timed keys; the
        stall file also lists the callbacks that ran while each slow one waited."""
        if self._task is not None:
            self._task.cancel()
        if self._watching:
            import gc

            self._watching = False
            self._untime()
            gc.callbacks.remove(self._on_gc)
            self._write_stalls(keys)

    def _write_stalls(self, keys: Sequence[tuple[str, float, float]]) -> None:
        """Each stall over STALL_S: its length, the GC runs in it, the stacks sampled in it."""
        assert self._stacks_to
        out = []
        for t, late in self.samples:
            if late < self.STALL_S:
                continue
            end = time.perf_counter() - (time.time() - t)  # perf_counter at the wake-up
            start = end - late - 0.01
            out.append({
                "late_ms": round(1000 * late),
                "gc": [(g, round(1000 * d, 1)) for t0, g, d in self._gcs if start <= t0 < end],
                "stacks": [lines for ts, lines in self._stacks if start <= ts < end],
                "callbacks_cpu_ms": [(name, round(1000 * spent, 1))
                                     for ts, name, spent, _w in self._calls if start <= ts <= end],
            })
        runs: dict[int, list[float]] = {}
        for _t0, g, d in self._gcs:
            runs.setdefault(g, []).append(1000 * d)
        gcs = {f"gen{g}": {"n": len(d), "ms_total": round(sum(d), 1),
                           "ms_max": round(max(d), 1)} for g, d in sorted(runs.items())}
        slow = [{"key": key, "ms": round(1000 * took),
                 "callbacks_cpu_ms": [(name, round(1000 * spent, 1), round(1000 * (ts - t0)))
                                      for ts, name, spent, _w in self._calls
                                      if t0 - 0.1 <= ts <= t0 + took]}
                for key, t0, took in keys if took >= 0.08]
        # Every timed call and GC run of the whole probe, in ms from its start: a stall is
        # often several callbacks in one step of the loop, and which of them recur long is
        # what the longest beats alone cannot say (bench/stall_report.py prints both).
        t_first = self._t_start
        calls = [(round(1000 * (ts - t_first), 1), name, round(1000 * spent, 1),
                  round(1000 * wall, 1)) for ts, name, spent, wall in self._calls
                 if ts >= t_first]
        gc_runs = [(round(1000 * (t0 - t_first), 1), g, round(1000 * d, 1))
                   for t0, g, d in self._gcs]
        Path(self._stacks_to).write_text(json.dumps({"gc": gcs, "stalls": out,
                                                     "slow_keys": slow, "calls": calls,
                                                     "gc_runs": gc_runs}, indent=1))

    def between(self, t0: float, t1: float) -> list[float]:
        return [d for t, d in self.samples if t0 <= t < t1]

    def cpu_between(self, t0: float, t1: float) -> list[float]:
        """The beats of ``between`` in the loop thread's CPU time."""
        return [c for (t, _d), c in zip(self.samples, self.cpu_samples, strict=False)
                if t0 <= t < t1]


def _ms_stats(values: list[float], never: int = 0) -> dict[str, Any]:
    """n, p50, p99, max in ms; ``never`` more values that did not happen at all (samples that
    never reached the state) count as infinitely late, so they cannot flatter a percentile."""
    from bench._common import pct

    padded = values + [math.inf] * never if never else values
    return {"n": len(values), "never": never, "p50_ms": 1000 * pct(padded, 0.5),
            "p99_ms": 1000 * pct(padded, 0.99),
            "max_ms": math.inf if never else 1000 * max(values) if values else math.nan}


# --- bare subscriber ---------------------------------------------------------------------------


async def bare_main(host: str, port: int, cluster: str) -> dict[str, Any]:
    """aiomqtt with the console's transport settings, doing nothing with what it receives."""
    cmds = Commands()
    discards = Discards()
    client = make_client(BrokerURL(host, port), f"bare-{os.getpid()}", keepalive=30,
                         max_queued_incoming=MAX_QUEUED_INCOMING)
    telemetry = other = 0
    first = last = 0.0
    window: tuple[float, float] | None = None
    sent: int | None = None

    async def control() -> None:
        nonlocal window, sent
        t0, seconds = (await cmds.next("GO"))
        window = (float(t0), float(t0) + float(seconds))
        sent = int((await cmds.next("END"))[0])

    async with client:
        for filt in subscriptions(cluster):
            await client.subscribe(filt, qos=1)
        say("READY")
        ctl = asyncio.create_task(control())
        it = client.messages.__aiter__()
        idle_since = time.monotonic()
        while True:
            if sent is not None and (telemetry >= sent or time.monotonic() - idle_since > 3.0):
                break
            try:
                msg = await asyncio.wait_for(it.__anext__(), 0.5)
            except TimeoutError:
                continue
            now = time.time()
            idle_since = time.monotonic()
            if msg.topic.value.endswith("/telemetry"):
                if not telemetry:
                    first = now
                telemetry += 1
                last = now
            else:
                other += 1
        await ctl
    return {"telemetry": telemetry, "other": other, "first": first, "last": last,
            "discarded": discards.count}


# --- the console ---------------------------------------------------------------------------


class TimedIngest(Ingest):
    """The real Ingest, plus the sample time of every telemetry message it stored."""

    def __init__(self, cluster: str) -> None:
        super().__init__(cluster)
        self.pending: list[int] = []
        self.taken: list[int] = []
        self.stored = 0

    def handle(self, topic: str, payload: bytes, rx_ts: float) -> None:
        super().handle(topic, payload, rx_ts)
        if topic.endswith("/telemetry"):
            got = self._batch.telemetry.get(topic.split("/")[4])
            if got is not None and got[0] is rx_ts:  # this very message was stored
                self.pending.append(got[1].ts)
                self.stored += 1

    def take_batch(self) -> Batch:
        batch = super().take_batch()
        self.taken, self.pending = self.pending, []
        return batch


def ui_state(app: FleetdeckApp) -> tuple[object, ...]:
    """What a navigation key changes: the view, the screen, the focused widget's cursor."""
    w = app.focused
    if hasattr(w, "current_key"):
        # A list re-sorted by the live feed keeps its cursor on the same node at a new index
        # (and scrolls with it): what a cursor key changes is the node under the cursor.
        return (app.current_mode, id(app.screen), id(w), getattr(w, "current_key", None))
    return (app.current_mode, id(app.screen), id(w), getattr(w, "cursor", None),
            getattr(w, "cursor_node", None), getattr(w, "cursor_gpu", None),
            getattr(w, "top", None))


class KeyProbe:
    def __init__(self, key: str, snapshot: tuple[object, ...], switch: bool) -> None:
        self.key = key
        self.snapshot = snapshot
        self.switch = switch
        """A view switch is on screen once the new view has refreshed with the fleet's data
        and then painted; a cursor key once the moved cursor painted."""
        self.refreshed = False
        self.t0 = time.perf_counter()
        self.latency: float | None = None
        self.done = asyncio.Event()


class BenchApp(FleetdeckApp):
    """FleetdeckApp with stopwatches on its tick, its view refresh and its paint."""

    CSS_PATH = str(Path(tui_app.__file__).parent / FleetdeckApp.CSS_PATH)  # relative to app.py

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.measuring = False
        self.apply_lag: list[float] = []
        self.paint_lag: list[float] = []
        self.tick_log: list[tuple[float, float, int]] = []
        """(time, tick ms, messages) per tick while measuring."""
        self.applied_samples = 0
        self.first_apply = self.last_apply = 0.0
        self.first_batch = 0
        self._await_paint: list[int] = []
        self.paints = 0
        self.key: KeyProbe | None = None
        self.key_log: list[tuple[str, float, float]] = []
        """(key, perf_counter when posted, seconds to the screen) of each ``press_timed``."""

    def tick(self, paint_later: bool = False) -> TickReport:
        t0 = time.time()
        report = super().tick(paint_later)
        ingest = self.session.ingest
        taken: list[int] = []
        if isinstance(ingest, TimedIngest):
            taken, ingest.taken = ingest.taken, []
        if self.measuring:
            applied = t0 + report.apply_ms / 1000
            self.tick_log.append((t0, self.tick_ms, report.messages))
            if taken:
                if not self.applied_samples:
                    self.first_apply, self.first_batch = applied, len(taken)
                self.last_apply = applied
                self.applied_samples += len(taken)
                self.apply_lag.extend(applied - ts / 1000 for ts in taken)
                self._await_paint.extend(taken)
        return report

    def refresh_view(self, now: float | None = None) -> None:
        super().refresh_view(now)
        key = self.key
        if key is not None and key.switch and ui_state(self) != key.snapshot:
            key.refreshed = key.refreshed or self.screen.is_mounted

    def _display(self, screen: Any, renderable: Any) -> None:
        super()._display(screen, renderable)
        if renderable is None:
            return
        if self.is_headless and isinstance(renderable, CompositorUpdate):
            renderable.render_segments(self.console)  # what a terminal would be sent
        now = time.time()
        self.paints += 1
        if self._await_paint:
            self.paint_lag.extend(now - ts / 1000 for ts in self._await_paint)
            self._await_paint = []
        key = self.key
        if key is not None and key.latency is None and ui_state(self) != key.snapshot and (
                not key.switch or key.refreshed):
            key.latency = time.perf_counter() - key.t0
            key.done.set()

    async def press_timed(self, key: str, switch: bool) -> float:
        """Post ``key`` as Pilot does; seconds until its effect was painted."""
        char = key if len(key) == 1 else None
        probe = self.key = KeyProbe(key, ui_state(self), switch)
        event = events.Key(key, char)
        event.set_sender(self)
        assert self._driver is not None
        self._driver.send_message(event)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(probe.done.wait(), KEY_TIMEOUT_S)
        self.key = None
        latency = probe.latency if probe.latency is not None else KEY_TIMEOUT_S
        self.key_log.append((key, probe.t0, latency))
        return latency


NAV_CYCLE: list[tuple[str, bool]] = [
    ("right", False), ("down", False), ("pagedown", False), ("pageup", False), ("up", False),
    ("left", False), ("2", True), ("down", False), ("pagedown", False), ("pageup", False),
    ("up", False), ("3", True), ("4", True), ("5", True), ("1", True),
]
"""Cursor keys on the overview grid and the node list (each move undone, so the cursor never
hits an edge where a key would change nothing), and every view switch."""


async def console_main(host: str, port: int, cluster: str, nodes: int, keys_from: float,
                       drain_s: float) -> dict[str, Any]:
    from bench._common import rss_mib

    cmds = Commands()
    discards = Discards()
    ingest = TimedIngest(cluster)
    app = BenchApp(cluster=cluster, url=BrokerURL(host, port), connect=True, tick_s=0.5,
                   ingest=ingest, audit=MemoryAudit(), operator="bench")
    probe = LoopProbe()
    out: dict[str, Any] = {}
    async with app.run_test(size=(160, 48)) as pilot:
        feed = app.session.feed
        assert feed is not None
        deadline = time.monotonic() + 30
        while feed.conn.state != "connected":
            if time.monotonic() > deadline:
                raise SystemExit(f"console never connected: {feed.conn.detail}")
            await asyncio.sleep(0.05)
        say("READY")
        # Births: report progress until every node is born (the parent decides when to give up).
        seen = -1
        while True:
            n = len(app.state.nodes)
            if n != seen:
                say(f"BORN {n}")
                seen = n
            if n >= nodes:
                break
            await asyncio.sleep(0.2)
        # Visit every view once (first visits compose the screens; not timed), back to overview.
        first_visit = []
        for key, switch in (("2", True), ("3", True), ("4", True), ("5", True), ("1", True)):
            first_visit.append(await app.press_timed(key, switch))
        await pilot.pause()
        say("WARM")
        t_go, seconds = (float(x) for x in await cmds.next("GO"))
        while time.time() < t_go:  # noqa: ASYNC110
            await asyncio.sleep(0.005)
        if probe.stalls_file:  # what the long callbacks in the stall file were made of
            probe.time_console_calls(app)
        probe.start()
        app.measuring = True
        t_end = t_go + seconds
        # Keys, from a share of the stream on, while it flows.
        while time.time() < t_go + keys_from * seconds:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        t_keys = time.time()
        nav: list[float] = []
        per_key: list[tuple[str, int]] = []
        switches: list[float] = []
        i = 0
        while time.time() < t_end:
            key, switch = NAV_CYCLE[i % len(NAV_CYCLE)]
            i += 1
            latency = await app.press_timed(key, switch)
            (switches if switch else nav).append(latency)
            per_key.append((key, round(1000 * latency)))
            await asyncio.sleep(0.05)  # an operator's pace, not a key storm
        t_keys_end = time.time()
        rss_end = rss_mib()
        sent = int((await cmds.next("END"))[0])
        # Drain: what is still queued gets its chance to reach the state, within limits.
        idle_since, last = time.monotonic(), app.applied_samples
        stop_at = time.monotonic() + drain_s
        while app.applied_samples < sent and time.monotonic() < stop_at:
            await asyncio.sleep(0.1)
            if app.applied_samples != last:
                idle_since, last = time.monotonic(), app.applied_samples
            elif time.monotonic() - idle_since > 3.0:
                break
        app.measuring = False
        paint_by = time.monotonic() + 3.0  # the last applied samples' paint
        while app._await_paint and time.monotonic() < paint_by:  # noqa: ASYNC110
            await asyncio.sleep(0.02)
        probe.stop()
        out = {
            "stored": ingest.stored, "discarded": discards.count,
            "applied": app.applied_samples, "sent": sent,
            "received": ingest.received, "malformed": app.state.malformed.total,
            "malformed_reasons": dict(app.state.malformed.by_reason),
            "nodes": len(app.state.nodes), "unborn": len(app.state.unborn),
            "first_apply": app.first_apply, "last_apply": app.last_apply,
            "first_batch": app.first_batch,
            "apply_lag": _ms_stats(app.apply_lag, max(0, sent - len(app.apply_lag))),
            "paint_lag": _ms_stats(app.paint_lag, max(0, sent - len(app.paint_lag))),
            "stall_stream": _ms_stats(probe.between(t_go, t_end)),
            "stall_keys": _ms_stats(probe.between(t_keys, t_keys_end)),
            "stall_stream_cpu": _ms_stats(probe.cpu_between(t_go, t_end)),
            "keys_nav": _ms_stats(nav), "keys_switch": _ms_stats(switches),
            "keys_timed_out": sum(1 for x in nav + switches if x >= KEY_TIMEOUT_S),
            "first_visit_ms": [round(1000 * x) for x in first_visit],
            "ticks": len(app.tick_log),
            "tick_ms": _ms_stats([ms / 1000 for _t, ms, _m in app.tick_log]),
            "paints": app.paints, "rss_end_mib": rss_end, "rss_peak_mib": rss_mib(field="VmHWM"),
            "queued_at_end": feed.queued, "queue_hwm": feed.queue_hwm,
            "dropped": dict(feed.dropped),
            "connects": feed.conn.connects, "conn": f"{feed.conn.state} {feed.conn.detail}",
            "per_key": per_key, "t_keys": t_keys, "t_keys_end": t_keys_end,
        }
    return out


def child_main(role: str, port: int, cluster: str, nodes: int, keys_from: float,
               drain_s: float) -> None:
    tune_gc()  # as run_console does
    if role == "bare":
        result = asyncio.run(bare_main("127.0.0.1", port, cluster))
    else:
        from fleetdeck.console.tui import render_cycles

        render_cycles.install()  # as run_console does
        result = asyncio.run(console_main("127.0.0.1", port, cluster, nodes, keys_from,
                                          drain_s))
    say("RESULT " + json.dumps(result))
