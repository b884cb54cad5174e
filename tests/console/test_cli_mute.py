"""``fleetdeck drain``/``resume``/``restart-job`` say a connected broker that stopped answering
(``CommandRun._watch_mute``, BROKER_MUTE_SAID_S), from the seconds since the broker last sent
anything. The session pings a quiet broker only as it ticks: a command that did not run for a
while (suspended with Ctrl-Z, a starved host, a long tick) asked nothing meanwhile, and the
broker's silence over that gap is no sign of a hang."""

import io

import pytest

from fleetdeck.brokerurl import BrokerURL
from fleetdeck.console.audit import MemoryAudit
from fleetdeck.console.cli import commands
from fleetdeck.console.cli.commands import CommandRun


def _run(monkeypatch: pytest.MonkeyPatch) -> tuple[CommandRun, io.StringIO, list[float]]:
    out = io.StringIO()
    run = CommandRun(BrokerURL("127.0.0.1", 9), "cli", "carol", audit=MemoryAudit(),
                     timeout_s=30.0, out=out)
    now = [1000.0]
    monkeypatch.setattr(commands.time, "monotonic", lambda: now[0])
    return run, out, now


def test_a_command_that_did_not_run_does_not_call_its_answering_broker_hung(monkeypatch):
    run, out, now = _run(monkeypatch)
    run._watch_mute(0.3, sent=True)
    now[0] += 10.0  # suspended: no tick, no ping, for 10 s
    run._watch_mute(10.3, sent=True)  # the first watch on resuming, before its ping
    for _ in range(10):
        now[0] += 0.1
        run._watch_mute(0.05, sent=True)  # its ping answered at once
    assert "has not answered" not in out.getvalue(), out.getvalue()
    assert "answers again" not in out.getvalue(), out.getvalue()
    assert run._cut_off_s() is None


def test_a_broker_silent_while_the_command_runs_is_said_hung_once_and_back(monkeypatch):
    run, out, now = _run(monkeypatch)
    heard = 0.0
    for _ in range(70):  # ticking every 0.1 s, the broker silent for 7 s
        now[0] += 0.1
        heard += 0.1
        run._watch_mute(heard, sent=True)
    said = out.getvalue().splitlines()
    assert len([line for line in said if "has not answered for 5 s (hung?)" in line]) == 1, said
    assert run._cut_off_s() == pytest.approx(7.0, abs=0.2)
    now[0] += 0.1
    run._watch_mute(0.05, sent=True)
    assert out.getvalue().splitlines()[-1] == "the broker answers again after 7 s"


def test_a_broker_that_hangs_after_a_stall_is_said_silent_for_the_time_the_command_ran(
        monkeypatch):
    # Suspended 10 s, then the broker is silent 6 s more while the command runs: the line
    # counts the 6 s it was asked and did not answer, as the "answers again" line and
    # ``_cut_off_s`` do, not the 16 s since its last word (the stall's part is no sign).
    run, out, now = _run(monkeypatch)
    run._watch_mute(0.3, sent=True)
    now[0] += 10.0
    heard = 10.3
    run._watch_mute(heard, sent=True)
    for _ in range(60):
        now[0] += 0.1
        heard += 0.1
        run._watch_mute(heard, sent=True)
    said = [line for line in out.getvalue().splitlines() if "has not answered" in line]
    assert len(said) == 1 and "has not answered for 5 s (hung?)" in said[0], said
    assert run._cut_off_s() == pytest.approx(6.0, abs=0.2)
