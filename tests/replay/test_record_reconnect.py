"""`fleetdeck record` outlives a broker restart: it reconnects, records on until --duration and
marks the gap (docs/recording.md, "Gaps")."""

import subprocess
import time
from pathlib import Path

from fleetdeck.console.recording import RecordingReader
from tests.conftest import REPO, fleetdeck_cmd, run_cli, spawn, stop_process

DURATION_S = 10.0


def wait_for_text(path: Path, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {text!r} in {path}")


def test_record_reconnects_after_a_broker_restart_and_marks_the_gap(mosquitto, tmp_path):
    url = str(mosquitto.url)
    out = tmp_path / "gap.jsonl"
    sim = spawn("sim", "--broker", url, "--cluster", "gap", "--nodes", "2", "--interval", "0.5",
                log=tmp_path / "sim.log")
    began = time.monotonic()
    rec = subprocess.Popen(
        fleetdeck_cmd("record", "--broker", url, "--cluster", "gap", "--out", str(out),
                      "--duration", str(DURATION_S)),
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        cwd=REPO, start_new_session=True,
    )
    try:
        wait_for_text(out, "/telemetry", timeout=DURATION_S / 2)
        mosquitto.kill()
        time.sleep(1.0)
        assert rec.poll() is None, "record ended when the broker went away"
        mosquitto.start()
        restarted = time.time()
        _, err = rec.communicate(timeout=DURATION_S + 20)
        ran = time.monotonic() - began
    finally:
        stop_process(sim)
        if rec.poll() is None:
            rec.kill()
            rec.wait()
    assert rec.returncode == 0, err
    assert "Traceback" not in err
    assert ran >= DURATION_S, f"record stopped after {ran:.1f} s, before its duration"
    assert "broker connection lost" in err and "broker back after" in err
    assert "1 gap(s) where the broker was away" in err

    reader = RecordingReader(out)
    msgs = list(reader.messages())
    assert reader.report.gaps == 1 and reader.report.skipped == 0, reader.report.problems
    assert any(m.t > restarted and m.topic.endswith("/telemetry") for m in msgs), \
        "nothing recorded after the broker came back"

    res = run_cli("replay", str(out), "--headless", "--summary-json", timeout=60)
    assert res.returncode == 0, res.stderr
    assert "the recording has 1 gap(s) where the recorder had lost the broker" in res.stderr
