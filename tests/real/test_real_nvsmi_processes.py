"""The nvidia-smi processes a reader starts: one at a time, and none left behind.

``subprocess.run`` killed only the process it started when its timeout ran out, so a wrapper's
nvidia-smi (a site script, a container shim) was left running at each timeout, one more a
minute on a wedged driver; one still running when the agent stopped outlived the agent
(docs/reliability.md, "A slow GPU reader is not a hung one")."""

import os
import threading
import time
from pathlib import Path

from fleetdeck.agents.real import nvsmi
from fleetdeck.agents.real.nvsmi import NvsmiReader


def state(pid: int) -> str:
    """The process's state letter (``S``, ``R``, ``D``, ``Z`` for a zombie), '' once reaped."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def running(pid: int) -> bool:
    return state(pid) not in ("", "Z")


def wrapper(tmp_path: Path, work: str, wait: bool = True) -> tuple[Path, Path]:
    """An ``nvidia-smi`` that is a shell script doing ``work`` in a child of its own, as a
    site's wrapper would; it records its pid and its child's. Without ``wait`` it exits at
    once, its child running on (with its output)."""
    pids, smi = tmp_path / "pids", tmp_path / "nvidia-smi"
    end = "wait\n" if wait else "exit 0\n"
    smi.write_text(f"#!/bin/sh\necho $$ >> {pids}\n{work} &\necho $! >> {pids}\n{end}")
    smi.chmod(0o755)
    return smi, pids


def recorded(pids: Path) -> list[int]:
    return [int(p) for p in pids.read_text().split()] if pids.exists() else []


def test_an_nvidia_smi_past_its_timeout_is_killed_with_what_it_started_and_reaped(
        tmp_path, monkeypatch):
    monkeypatch.setattr(nvsmi, "HUNG_RETRY_S", 0.0)  # asked again at once: three tries
    smi, pids = wrapper(tmp_path, "sleep 30")
    reader = NvsmiReader(binary=str(smi), timeout_s=0.5)
    for tries in range(1, 4):
        samples, errors = reader.read()
        assert samples == [] and f"{smi}: no answer within 0.5 s" in errors[0], errors
        started = recorded(pids)
        assert len(started) == 2 * tries, started
        # The process it started is reaped, not left a zombie, before read() returns.
        assert all(state(p) == "" for p in started[::2]), [state(p) for p in started]
        # What that one started got the group's SIGKILL; it is not the reader's child to wait
        # for, and a busy host may show it alive a moment longer (a CI run did).
        deadline = time.monotonic() + 5
        while (left := [p for p in started if running(p)]) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not left, f"still running after try {tries}: {left} of {started}"


def test_no_second_nvidia_smi_starts_while_the_killed_one_has_not_gone(tmp_path, monkeypatch):
    """One stuck in the driver (state D) outlives SIGKILL until the driver lets it go: the
    kill does nothing here, as there."""
    monkeypatch.setattr(nvsmi, "HUNG_RETRY_S", 0.0)
    monkeypatch.setattr(nvsmi, "REAP_WAIT_S", 0.1)
    monkeypatch.setattr(nvsmi, "kill_group", lambda proc: None)
    smi, pids = wrapper(tmp_path, "sleep 30")
    reader = NvsmiReader(binary=str(smi), timeout_s=0.3)
    try:
        reader.read()
        first = recorded(pids)
        assert len(first) == 2 and all(running(p) for p in first)
        for _ in range(3):
            samples, errors = reader.read()
            assert samples == [] and "has not gone (stuck in the driver?)" in errors[0], errors
        assert recorded(pids) == first, "another nvidia-smi started beside the stuck one"
    finally:
        for p in recorded(pids):
            if running(p):
                os.kill(p, 9)


def test_closing_the_reader_kills_the_nvidia_smi_still_running_and_starts_no_other(tmp_path):
    """At the agent's stop (``RealSource.close``): it would outlive the agent."""
    smi, pids = wrapper(tmp_path, "sleep 30")
    reader = NvsmiReader(binary=str(smi), timeout_s=30)
    threading.Thread(target=reader.read, daemon=True).start()
    deadline = time.monotonic() + 5
    while len(recorded(pids)) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    started = recorded(pids)
    assert started and all(running(p) for p in started)
    t0 = time.monotonic()
    reader.close()
    assert time.monotonic() - t0 < 1
    deadline = time.monotonic() + 2
    while any(running(p) for p in started) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not [p for p in started if running(p)], "left running after the reader closed"
    # A sample read while the agent stops starts none: it would be left behind.
    samples, errors = reader.read()
    assert samples == [] and "not run, the agent is stopping" in errors[0], errors
    assert recorded(pids) == started


def test_an_nvidia_smi_already_reaped_is_not_killed_by_its_pid_again():
    """Once reaped, its pid (its group's id) may be another process's: a kill then (after
    ``communicate`` raised having reaped it, or ``close`` between the reader's reap and the
    kill) killed whatever group had it now."""
    import subprocess

    gone = subprocess.Popen(["true"], start_new_session=True)
    gone.wait()
    other = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        gone.pid = other.pid  # the pid, handed on to another process group
        nvsmi.kill_group(gone)  # type: ignore[arg-type]
        time.sleep(0.2)
        assert other.poll() is None, "another process group was killed"
    finally:
        other.kill()
        other.wait()


def test_a_wrapper_reaped_before_its_kill_still_has_its_nvidia_smi_killed(tmp_path):
    """The wrapper gone and reaped, its nvidia-smi running on (``communicate`` raised having
    reaped the wrapper): the kill skipped the group, and the nvidia-smi was left behind. Its
    group's id is still the group's while one of it is left (Linux frees it with the last)."""
    import subprocess

    smi, pids = wrapper(tmp_path, "sleep 30", wait=False)
    proc = subprocess.Popen([str(smi)], stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        proc.wait(5)
        leader, child = recorded(pids)
        assert state(leader) == "" and running(child)
        nvsmi.kill_group(proc)  # type: ignore[arg-type]
        deadline = time.monotonic() + 2
        while running(child) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not running(child), "the wrapper's nvidia-smi left running"
    finally:
        for p in recorded(pids):
            if running(p):
                os.kill(p, 9)


def test_closing_the_reader_kills_a_wrapper_that_has_exited_with_its_nvidia_smi_running(
        tmp_path):
    """close() polled first, reaping the exited wrapper, then skipped the kill as reaped; the
    read's own kill at its timeout skipped it too: the nvidia-smi outlived the agent."""
    smi, pids = wrapper(tmp_path, "sleep 30", wait=False)
    reader = NvsmiReader(binary=str(smi), timeout_s=2)
    reading = threading.Thread(target=reader.read, daemon=True)
    reading.start()
    try:
        deadline = time.monotonic() + 5
        while not (len(recorded(pids)) == 2 and not running(recorded(pids)[0])
                   and time.monotonic() < deadline):
            time.sleep(0.02)
        leader, child = recorded(pids)
        assert not running(leader) and running(child)  # the wrapper exited, not reaped yet
        reader.close()
        reading.join(5)
        deadline = time.monotonic() + 2
        while running(child) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not running(child), "the wrapper's nvidia-smi left running after the close"
    finally:
        for p in recorded(pids):
            if running(p):
                os.kill(p, 9)


def test_no_second_nvidia_smi_starts_while_a_killed_wrappers_own_has_not_gone(
        tmp_path, monkeypatch):
    """The wrapper killed past its timeout and reaped, its nvidia-smi stuck in the driver (it
    outlives SIGKILL: here the kill reaches only the wrapper): the guard looked at the wrapper
    alone, and started another beside it at each try."""
    monkeypatch.setattr(nvsmi, "HUNG_RETRY_S", 0.0)
    monkeypatch.setattr(nvsmi, "REAP_WAIT_S", 0.1)
    monkeypatch.setattr(nvsmi, "kill_group", lambda proc: proc.kill())
    smi, pids = wrapper(tmp_path, "sleep 30")
    reader = NvsmiReader(binary=str(smi), timeout_s=0.3)
    try:
        reader.read()
        leader, child = first = recorded(pids)
        assert state(leader) == "" and running(child), [state(p) for p in first]
        for _ in range(3):
            samples, errors = reader.read()
            assert samples == [] and "has not gone (stuck in the driver?)" in errors[0], errors
        assert recorded(pids) == first, "another nvidia-smi started beside the stuck one"
    finally:
        for p in recorded(pids):
            if running(p):
                os.kill(p, 9)


def test_what_a_wrapper_that_answered_left_running_is_not_the_readers(tmp_path):
    """A wrapper that answers and leaves a helper of its own running (its output elsewhere):
    not an nvidia-smi killed and not gone, so the next read starts, and the close leaves it."""
    smi, pids = wrapper(tmp_path, "sleep 30 >/dev/null 2>&1", wait=False)
    reader = NvsmiReader(binary=str(smi), timeout_s=5)
    try:
        for _ in range(2):
            _, errors = reader.read()
            assert not any("has not gone" in e for e in errors), errors
        helpers = recorded(pids)[1::2]
        assert len(helpers) == 2 and all(running(p) for p in helpers)
        reader.close()
        assert all(running(p) for p in helpers)
    finally:
        for p in recorded(pids):
            if running(p):
                os.kill(p, 9)


def test_a_process_name_cut_inside_a_character_does_not_stop_the_check(tmp_path):
    """The kernel cuts a process name at 15 bytes, maybe inside a UTF-8 character: the group
    check read /proc as text, raised on such a name, and every later GPU read of the agent
    failed with it (a review)."""
    import subprocess

    name = tmp_path / "a日日日日日"  # 16 bytes: cut to 15, inside the last character
    name.symlink_to("/bin/sleep")
    odd = subprocess.Popen([str(name), "30"])
    gone = subprocess.Popen(["true"], start_new_session=True)
    gone.wait()
    try:
        time.sleep(0.1)
        assert b"\xe6\x97" in Path(f"/proc/{odd.pid}/stat").read_bytes()  # the cut name
        assert nvsmi.group_left(gone) is False  # type: ignore[arg-type]
    finally:
        odd.kill()
        odd.wait()
