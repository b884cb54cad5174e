"""``fleetdeck collect`` and SIGHUP: it used to end at once (Python's default), the minutes in
progress lost and not a word said, and systemd's ``Restart=on-failure`` takes a SIGHUP death
for a clean stop, so the collector never came back (2026-12-07 drill). A SIGHUP is an orderly
stop now, with exit 129: the unit starts it again (docs/recording.md)."""

import signal
import subprocess

from tests.conftest import eventually, spawn, stop_process


async def test_a_sighup_stops_the_collector_in_order_with_exit_129(mosquitto, tmp_path):
    log = tmp_path / "collect.log"
    db = tmp_path / "hup.db"
    sim = spawn("sim", "--broker", str(mosquitto.url), "--cluster", "hup", "--nodes", "2",
                log=tmp_path / "sim.log")
    proc = spawn("collect", "--broker", str(mosquitto.url), "--cluster", "hup", "--db", str(db),
                 log=log)
    try:
        await eventually(lambda: "caught up" in log.read_text(), 60,
                         message="the collector caught up")
        proc.send_signal(signal.SIGHUP)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            raise AssertionError("SIGHUP did not stop the collector") from None
        said = log.read_text()
        assert code == 129, (code, said)
        assert "stopped by SIGHUP, its history written" in said, said
        assert "Traceback" not in said
    finally:
        stop_process(proc)
        stop_process(sim)
