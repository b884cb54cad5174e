"""RealSource over a slow GPU reader: the last figures stand in for a slow read only while they
are current, a slow reader's GPUs are never unread, and a hung reader's stay unread until a read
answers (docs/reliability.md, "A slow GPU reader is not a hung one").

The reader here answers each call when the test opens that call's gate, so which call is slow,
and by how much, is the test's to say rather than the host's load."""

import random
import re
import threading
import time

import pytest

from fleetdeck.agents.real.common import GpuInventoryResult
from fleetdeck.agents.real.source import HostReader, RealSource
from fleetdeck.protocol.fast import GpuSample
from fleetdeck.protocol.messages import GpuInventory

from .test_real_source import fake_proc

WAIT_S = 0.05
"""How long a sample waits for the GPU reader (0.75 of the interval in the agent)."""


class GatedGpus:
    """Two GPUs; each ``read`` reads them as they are when it starts (``temp_c``, ``lost``),
    and answers once its own gate is open (``gate``)."""

    name = "nvsmi"

    def __init__(self) -> None:
        self.temp_c = 50.0
        self.lost: set[int] = set()
        self.gates: list[threading.Event] = []
        self.calls = 0

    def gate(self, n: int) -> threading.Event:
        """The gate of the ``n``-th read (from 0)."""
        while len(self.gates) <= n:
            self.gates.append(threading.Event())
        return self.gates[n]

    def inventory(self) -> GpuInventoryResult:
        return GpuInventoryResult(gpus=[
            GpuInventory(index=i, pci_bus_id=f"00000000:{i + 1:02X}:00.0", name="H100")
            for i in range(2) if i not in self.lost])

    def read(self) -> tuple[list[GpuSample], list[str]]:
        n, self.calls = self.calls, self.calls + 1
        read = [GpuSample(index=i, temp_c=self.temp_c) for i in range(2) if i not in self.lost]
        self.gate(n).wait(30)
        return read, []

    def close(self) -> None:
        for g in self.gates:
            g.set()


def source(gpus: GatedGpus, tmp_path, hung_s: float) -> RealSource:
    return RealSource("nvsmi", gpu=gpus, host=HostReader(fake_proc(tmp_path / "proc")),
                      gpu_deadline_s=WAIT_S, gpu_hung_s=hung_s)


def seen(src: RealSource) -> tuple[list[tuple[int, bool, float | None]], str]:
    """Each GPU of a sample as (index, present, temperature), and the sample's first error."""
    r = src.read(time.time())
    return [(g.index, g.present, g.temp_c) for g in r.gpus], (r.errors or [""])[0]


def answered(gpus: GatedGpus, n: int) -> None:
    """Opens the ``n``-th read's gate and waits a moment for its answer to come in."""
    gpus.gate(n).set()
    time.sleep(0.1)


def test_figures_read_before_a_new_inventory_are_not_published_after_it(tmp_path):
    """A reconnect's birth takes the inventory again: it found gpu1 lost during the outage, and
    the first sample after it still said gpu1 present at its old 50 C, from before the
    outage."""
    gpus = GatedGpus()
    src = source(gpus, tmp_path, hung_s=5.0)
    src.inventory()
    answered(gpus, 0)
    assert seen(src)[0] == [(0, True, 50.0), (1, True, 50.0)]
    src.read(time.time())  # read 1 in flight, slow
    answered(gpus, 1)
    # The outage: gpu1 falls off the bus, the other GPU heats up. Then the new birth.
    gpus.lost, gpus.temp_c = {1}, 95.0
    inv = src.inventory()
    assert [(g.index, g.pci_bus_id) for g in inv.gpus if g.index == 1], inv.gpus  # kept lost
    got, said = seen(src)  # read 2 slow: no figures of this inventory's yet
    assert got == [(0, True, None), (1, False, None)], got
    assert "no GPU figures yet" in said, said
    answered(gpus, 2)
    got, said = seen(src)
    assert got == [(0, True, 95.0), (1, False, None)], got


def test_a_read_in_flight_when_a_new_inventory_is_taken_is_not_published_after_it(tmp_path):
    gpus = GatedGpus()
    src = source(gpus, tmp_path, hung_s=5.0)
    src.inventory()
    answered(gpus, 0)
    src.read(time.time())  # read 0, in time
    src.read(time.time())  # read 1 in flight, what it read from before the birth
    gpus.lost = {1}
    src.inventory()  # slow behind read 1: the last inventory's GPUs, gpu1 among them
    answered(gpus, 1)
    got, said = seen(src)  # read 1 answered late, but from before the birth: read 2 slow
    assert got == [(0, True, None), (1, True, None)], (got, said)
    assert "no GPU figures yet" in said, said


HUNG_S = 1.0


def test_a_slow_readers_figures_too_old_to_show_leave_its_gpus_present_not_unread(tmp_path):
    """Read 0 answered, read 1 runs on, slower than a sample waits but not hung: once read 0's
    figures were too old to show, the sample said the GPUs unread, "no answer for 1 s (GPU
    driver hung …)", G1 at DRAIN severity on a healthy node. Their age was counted from when
    read 0 started, so a reader taking 0.6 of the hung limit had some samples "hung" at
    ``--interval 1`` and nearly all at ``--interval 4``."""
    hung_s = 2.0
    gpus = GatedGpus()
    src = source(gpus, tmp_path, hung_s=hung_s)
    src.inventory()
    got, said = seen(src)  # read 0 in flight
    assert got == [(0, True, None), (1, True, None)] and "no GPU figures yet" in said, said
    time.sleep(0.5)  # read 0 0.5 s in flight: its figures older than that once it answers
    gpus.gate(0).set()
    read_at = time.monotonic()
    time.sleep(1.0)
    got, said = seen(src)  # read 0's answer, late; read 1 in flight
    assert got == [(0, True, 50.0), (1, True, 50.0)], (got, said)
    time.sleep(read_at + hung_s + 0.4 - time.monotonic())
    got, said = seen(src)  # read 1 1.4 s in flight: slow; read 0 answered 2.4 s ago
    assert got == [(0, True, None), (1, True, None)], (got, said)
    assert re.match(r"nvsmi: no answer for 1\.[45] s yet \(a slow reader\): its last GPU "
                    r"figures were read 2\.[45] s ago, over 2 s: not shown", said), said
    gpus.gate(2).set()
    answered(gpus, 1)
    got, said = seen(src)  # read 2 answers in time
    assert got == [(0, True, 50.0), (1, True, 50.0)], (got, said)


def test_a_late_answer_held_past_the_age_limit_is_not_shown_nor_unread(tmp_path):
    """No sample read for a while (an outage without a new inventory): the slow read's answer,
    waiting for the next sample, was published by it as current; then, said unread, G1 for a
    reader that had answered in 0.1 s."""
    gpus = GatedGpus()
    src = source(gpus, tmp_path, hung_s=HUNG_S)
    src.inventory()
    src.read(time.time())  # read 0 slow
    answered(gpus, 0)
    time.sleep(HUNG_S + 0.2)
    got, said = seen(src)  # read 0's answer, now 1.3 s old; read 1 slow
    assert got == [(0, True, None), (1, True, None)], (got, said)
    assert re.match(r"nvsmi: answers slower than a sample waits \(0\.05 s\): its last GPU "
                    r"figures were read 1\.[345] s ago, over 1 s: not shown", said), said
    got, said = seen(src)  # read 1 still slow: the same, not its figures again
    assert got == [(0, True, None), (1, True, None)], (got, said)
    assert "(a slow reader): its last GPU figures were read 1." in said, said


def test_a_call_that_hung_while_no_sample_asked_leaves_the_gpus_unread(tmp_path):
    """Read 0 answered only after the hung limit, with no sample in between (an outage): what
    it read is dropped, and the slow read after it said the GPUs present, as if the reader
    had not hung."""
    gpus = GatedGpus()
    src = source(gpus, tmp_path, hung_s=HUNG_S)
    src.inventory()
    src.read(time.time())  # read 0 slow
    time.sleep(HUNG_S + 0.1)
    answered(gpus, 0)  # hung, then answered: no sample saw it overdue
    got, said = seen(src)  # read 1, slow
    assert got == [(0, False, None), (1, False, None)], (got, said)
    assert said.startswith("nvsmi: no answer for 1 s (GPU driver hung"), said
    gpus.gate(2).set()
    answered(gpus, 1)
    got, said = seen(src)  # read 2 answers in time
    assert got == [(0, True, 50.0), (1, True, 50.0)], (got, said)


class SlowGpus(GatedGpus):
    """Answers each read in 0.6-0.9 of ``hung_s``: slow, never hung."""

    def __init__(self, hung_s: float) -> None:
        super().__init__()
        self.hung_s = hung_s
        self.rng = random.Random(7)

    def read(self) -> tuple[list[GpuSample], list[str]]:
        time.sleep(self.hung_s * self.rng.uniform(0.6, 0.9))
        return [GpuSample(index=i, temp_c=self.temp_c) for i in range(2)], []


@pytest.mark.parametrize("interval_s", [0.8, 0.2])
def test_a_reader_slower_than_a_sample_waits_but_never_hung_never_has_its_gpus_unread(
        tmp_path, interval_s):
    """nvidia-smi taking 3.1 s at ``--interval 4`` (here, all at a fifth of the time): 11 of 12
    samples said the GPUs unread, "no answer for 7 s (GPU driver hung …)"; at ``--interval 1``
    and 2.8-3.5 s, a third to a half of them. A sample waits 0.75 of the interval."""
    hung_s = 1.0
    gpus = SlowGpus(hung_s)
    src = RealSource("nvsmi", gpu=gpus, host=HostReader(fake_proc(tmp_path / "proc")),
                     gpu_deadline_s=0.75 * interval_s, gpu_hung_s=hung_s)
    src.inventory()
    t0, samples = time.monotonic(), []
    for k in range(int(10 / interval_s) if interval_s < 0.5 else 12):
        time.sleep(max(0.0, t0 + k * interval_s - time.monotonic()))
        samples.append(seen(src))
    unread = [(got, said) for got, said in samples if any(not present for _, present, _ in got)]
    assert not unread, unread
    assert not [said for _, said in samples if "hung" in said.split(";")[0]], samples
    # And the GPUs have figures at all but the first samples, before any read answered.
    figured = [got[0][2] is not None for got, _ in samples]
    first = figured.index(True)
    assert first <= 5 and all(figured[first:]), figured


def test_a_hung_readers_gpus_stay_unread_until_a_read_answers(tmp_path):
    """After the hung call answered (dropped), the next one was only slow: the sample said the
    GPUs present (without figures), G1 cleared for that sample, and the incident closed and
    opened again."""
    gpus = GatedGpus()
    src = source(gpus, tmp_path, hung_s=HUNG_S)
    src.inventory()
    src.read(time.time())  # read 0 hangs
    time.sleep(HUNG_S + 0.1)
    got, said = seen(src)
    assert got == [(0, False, None), (1, False, None)], (got, said)
    assert said.startswith("nvsmi: no answer for 1 s (GPU driver hung"), said
    answered(gpus, 0)  # at last; what it read is dropped
    got, said = seen(src)  # read 1, slow
    assert got == [(0, False, None), (1, False, None)], (got, said)
    assert said.startswith("nvsmi: no answer for 1 s (GPU driver hung"), said
    gpus.gate(2).set()
    answered(gpus, 1)
    got, said = seen(src)  # read 2 answers in time
    assert got == [(0, True, 50.0), (1, True, 50.0)], (got, said)


class Xid79Gpus(GatedGpus):
    """A reader that, as nvidia-smi does for a GPU off the bus (XID 79), answers it absent."""

    def read(self) -> tuple[list[GpuSample], list[str]]:
        n, self.calls = self.calls, self.calls + 1
        read = [GpuSample(index=i, temp_c=self.temp_c) if i not in self.lost
                else GpuSample(index=i, present=False) for i in range(2)]
        self.gate(n).wait(30)
        return read, []


def test_a_gpu_off_the_bus_stays_absent_while_the_reader_is_slow(tmp_path):
    """Figures too old to show were replaced by the inventory's GPUs, each present: a GPU the
    last answer had absent (XID 79) read present again at the first slow read after it, its
    incident closed and opened again (a review)."""
    gpus = Xid79Gpus()
    src = source(gpus, tmp_path, hung_s=0.5)
    try:
        gpus.gate(0).set()
        seen(src)  # inventory and the first read
        gpus.lost.add(1)
        answered(gpus, 1)
        assert seen(src)[0][1][:2] == (1, False)  # read absent, at once
        time.sleep(0.6)  # the last answer is past the age limit; this read is slow
        got, _ = seen(src)
        assert [(i, present) for i, present, _t in got] == [(0, True), (1, False)], got
        assert all(t is None for _i, _p, t in got)  # no figures shown: too old
    finally:
        gpus.close()
