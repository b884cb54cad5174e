"""Kernel/system log parsing: Xid lines and IPoIB carrier flaps (aznhc test data, MIT)."""

import sys
import time

from fleetdeck.agents.real.kernel_log import (
    JOURNAL_CMD,
    CarrierRecord,
    CommandFollower,
    FileFollower,
    KernelLogMonitor,
    XidRecord,
    parse_line,
    split_prefix,
)
from fleetdeck.protocol.messages import Severity

from .conftest import DATA

# Shapes from TELEMETRY.md §3/§8: NVIDIA open-gpu-kernel-modules issue #1151, stas00/ml-engineering.
XID_LINES = [
    ("Aug 17 06:20:00 node-0042 kernel: NVRM: Xid (PCI:0000:2b:00): 79, pid=1234, name=python, "
     "GPU has fallen off the bus.", "0000:2b:00", 79, 1234, "python",
     "GPU has fallen off the bus."),
    ("[ 8123.456789] NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.",
     "0000:2b:00", 79, None, None, "GPU has fallen off the bus."),
    ("2025-08-17T06:21:00+0000 node-0042 kernel: NVRM: Xid (PCI:0000:b5:00): 63, pid=2211, "
     "name=pt_main_thread, Row Remapper: New row marked for remapping, reset gpu to activate",
     "0000:b5:00", 63, 2211, "pt_main_thread",
     "Row Remapper: New row marked for remapping, reset gpu to activate"),
    ("NVRM: Xid (PCI:0000:b3:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error "
     "detected on link 14(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)", "0000:b3:00", 74, None, None,
     "NVLink: fatal error detected on link 14(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)"),
    ("[Sun Aug 17 06:22:00 2025] NVRM: Xid (PCI:0001:00:00): 48, pid=99, name=python3, An "
     "uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at "
     "partition 6, subpartition 0.", "0001:00:00", 48, 99, "python3",
     "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at "
     "partition 6, subpartition 0."),
]


def flap_lines() -> list[str]:
    return (DATA / "1dev_6flap_syslog").read_text().splitlines()


def last_ts(lines: list[str], now: float) -> float:
    stamps = [split_prefix(line, now)[0] for line in lines]
    return max(t for t in stamps if t is not None)


def test_xid_lines_parse():
    for line, bus, xid, pid, process, message in XID_LINES:
        rec = parse_line(line, now=time.time())
        assert isinstance(rec, XidRecord), line
        assert (rec.pci_bus_id, rec.xid, rec.pid, rec.process, rec.message) == (
            bus, xid, pid, process, message)


def test_carrier_lines_parse_and_other_lines_do_not():
    lines = flap_lines()
    recs = [parse_line(line, now=time.time()) for line in lines]
    carriers = [r for r in recs if isinstance(r, CarrierRecord)]
    assert len(carriers) == sum("carrier" in line for line in lines)
    assert {r.netdev for r in carriers} == {"ib6"}
    assert sum(r.lost for r in carriers) == sum("lost carrier" in line for line in lines)
    assert all(r.ts is not None for r in carriers)
    assert recs[0] is None  # logrotate line
    clean = (DATA / "0flap_syslog").read_text().splitlines()
    assert all(parse_line(line) is None for line in clean)


def test_six_flaps_count_within_24h_and_escalate():
    lines = flap_lines()
    now = last_ts(lines, time.time()) + 60
    mon = KernelLogMonitor(component_by_netdev={"ib6": "mlx5_ib6:1"})
    assert mon.feed(lines, now) == sum("carrier" in line for line in lines)
    losses = sum("lost carrier" in line for line in lines)
    assert mon.carrier_losses("ib6", now) == losses
    assert mon.carrier_losses_by_component(now) == {"mlx5_ib6:1": losses}
    events = mon.take_events()
    assert [e.kind for e in events] == ["ib_flap"] * len(events)
    lost = [e for e in events if e.data["carrier"] == "lost"]
    assert [e.data["losses_24h"] for e in lost] == list(range(1, losses + 1))
    # aznhc: >= 5 losses per device in 24 h fails the node.
    assert [e.severity for e in lost] == [Severity.WARN] * 4 + [Severity.ERROR] * (losses - 4)
    assert all(e.component == "mlx5_ib6:1" for e in events)
    assert all(e.severity is Severity.INFO for e in events if e.data["carrier"] == "gained")
    # A day later the window is empty again.
    assert mon.carrier_losses("ib6", now + 86_400 + 60) == 0


def test_no_flaps_in_clean_log():
    mon = KernelLogMonitor()
    assert mon.feed((DATA / "0flap_syslog").read_text().splitlines(), time.time()) == 0
    assert mon.take_events() == []
    assert mon.carrier_losses("ib6", time.time()) == 0


def test_xid_maps_to_gpu_by_pci_bus_id():
    mon = KernelLogMonitor(gpu_by_pci={"00000000:2B:00.0": 3, "00000001:00:00.0": 0})
    now = time.time()
    mon.feed([XID_LINES[0][0], XID_LINES[3][0], XID_LINES[4][0]], now)
    events = mon.take_events()
    assert [e.component for e in events] == ["gpu3", "pci:0000:b3:00", "gpu0"]
    assert [e.severity for e in events] == [Severity.ERROR] * 3  # 79, 74, 48: drain XIDs
    assert events[0].data["xid"] == 79 and events[0].data["gpu"] == 3
    assert events[0].data["process"] == "python"
    assert mon.xid_last(3) == (79, events[0].ts_ms)
    assert mon.xid_last(0) == (48, events[2].ts_ms)
    assert mon.xid_last(5) is None
    mon.feed(["NVRM: Xid (PCI:0000:2b:00): 13, pid=1, name=x, Graphics Exception"], now)
    assert mon.take_events()[0].severity is Severity.INFO  # app fault
    mon.feed(["NVRM: Xid (PCI:0000:2b:00): 94, pid=1, name=x, Contained ECC error"], now)
    assert mon.take_events()[0].severity is Severity.WARN


def test_syslog_year_inference():
    # A December line read on January 2nd belongs to the previous year.
    jan2 = time.mktime((2026, 1, 2, 12, 0, 0, 0, 0, -1))
    ts, rest = split_prefix("Dec 31 23:59:59 host kernel: hello", jan2)
    assert time.localtime(ts).tm_year == 2025 and rest == "kernel: hello"
    ts, _ = split_prefix("Jan  2 11:00:00 host kernel: hello", jan2)
    assert ts is not None and jan2 - ts == 3600


def test_file_follower_reads_new_lines_and_survives_rotation(tmp_path):
    log = tmp_path / "syslog"
    log.write_text("old line\n")
    f = FileFollower(log)
    assert f.poll() == []  # history before the agent started is skipped
    with log.open("a") as fh:
        fh.write("Aug 17 06:18:01 vm systemd-networkd[1]: ib6: lost carrier\npartial")
    assert f.poll() == ["Aug 17 06:18:01 vm systemd-networkd[1]: ib6: lost carrier"]
    with log.open("a") as fh:
        fh.write(" line\n")
    assert f.poll() == ["partial line"]
    log.rename(tmp_path / "syslog.1")
    log.write_text("after rotation\n")
    assert f.poll() == ["after rotation"]
    (tmp_path / "syslog").unlink()
    assert f.poll() == [] and f.error and "syslog" in f.error
    f.close()


def test_command_follower(tmp_path):
    script = "import sys; print('NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.')"
    f = CommandFollower([sys.executable, "-c", script], restart_s=3600)
    got: list[str] = []
    deadline = time.monotonic() + 10
    while not got and time.monotonic() < deadline:
        got += f.poll()
        time.sleep(0.02)
    assert got == ["NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus."]
    while f.error is None and time.monotonic() < deadline:
        f.poll()
        time.sleep(0.02)
    assert f.error == f"{sys.executable} exited with status 0"
    assert f.poll() == []  # not restarted before restart_s
    f.close()


def test_command_follower_missing_binary():
    f = CommandFollower(["/nonexistent/journalctl", "-f"])
    assert f.poll() == []
    assert f.error is not None and "/nonexistent/journalctl" in f.error
    f.close()


def test_the_journal_is_read_back_a_day_within_this_boot():
    """A restarted agent forgot a flapping link's day (N5) and an XID of the last two hours:
    the journal is followed from a day back within this boot (not before a reboot, the repair
    an XID 79 asks for)."""
    assert {"--boot", "--since=-24h"} <= set(JOURNAL_CMD) and "--lines=0" not in JOURNAL_CMD
    assert CommandFollower(JOURNAL_CMD).reads_back


def test_lines_from_before_the_agent_started_count_and_make_no_event():
    """History read back changes the windows only: its events went out with the agent that
    saw them, and a restart must not send them again."""
    start = 1_750_000_000.0
    mon = KernelLogMonitor(gpu_by_pci={"0000:2b:00": 3},
                           component_by_netdev={"ib6": "mlx5_ib6:1"}, history_before=start)

    def iso(ts: float) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%S.000000+0000", time.gmtime(ts))

    old = [f"{iso(start - 3600 * h)} node systemd-networkd[5]: ib6: Lost carrier"
           for h in (20, 10, 5, 2)]
    old.append(f"{iso(start - 600)} node kernel: NVRM: Xid (PCI:0000:2b:00): 48, pid=1, "
               "name=python, An uncorrectable double bit error")
    assert mon.feed(old, start) == 5
    assert mon.take_events() == []
    assert mon.carrier_losses("ib6", start) == 4 and mon.xid_last(3) is not None
    assert [x.code for x in mon.xids(3, start)] == [48]
    mon.feed([f"{iso(start + 5)} node systemd-networkd[5]: ib6: Lost carrier"], start + 5)
    [event] = mon.take_events()
    assert event.kind == "ib_flap" and "5 losses in 24 h" in event.message
    assert event.severity is Severity.ERROR  # the fifth in a day: N5's threshold


def test_a_restarted_journal_command_does_not_count_its_day_twice(tmp_path):
    """journalctl --follow that exits is started again, and reads its --since day again: the
    lines up to the newest one returned are dropped, not counted a second time."""
    lines = tmp_path / "journal.txt"
    lines.write_text("2026-12-05T01:00:00.000001+0000 n kernel: a\n"
                     "2026-12-05T01:00:01.000002+0000 n kernel: b\n")
    cat = [sys.executable, "-c", f"print(open({str(lines)!r}).read(), end='')", "--since=-24h"]
    f = CommandFollower(cat, restart_s=0)

    def drain() -> list[str]:
        got: list[str] = []
        deadline = time.monotonic() + 10
        while f.error is None and time.monotonic() < deadline:
            got += f.poll()
            time.sleep(0.02)
        f.error = None
        return got

    assert [ln[-1] for ln in drain()] == ["a", "b"]
    with lines.open("a") as fh:
        fh.write("2026-12-05T01:00:02.000003+0000 n kernel: c\n")
    assert [ln[-1] for ln in drain()] == ["c"]
    f.close()
