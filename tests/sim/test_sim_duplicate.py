"""Two `fleetdeck sim` for the same nodes on one broker and cluster: each connection takes the
other's session over (one client id per node, MQTT 3.1.1: the broker closes the old socket and
says nothing). Both logs said only "lost the connection … retrying", again and again, and never
why (a newcomer's run); each says the likely cause once (docs/reliability.md, "Two clients with
one client id"), and the one left says when the takeovers stopped."""

import time

from tests.conftest import spawn, stop_process
from tests.sim.sim_logs import own_lines
from tests.sim.sim_logs import wait_for_lines as wait_for

AGENTS_SAID = "another client may be connected with the same client id fd-dup-gpu000"
SCHED_SAID = "another client may be connected with the same client id fd-dup-sched"


def test_a_second_simulator_for_the_same_nodes_is_named_once_not_per_retry(mosquitto, tmp_path):
    logs = [tmp_path / "first.log", tmp_path / "second.log"]
    args = ("sim", "--broker", str(mosquitto.url), "--cluster", "dup", "--nodes", "2",
            "--interval", "0.5")
    first = spawn(*args, log=logs[0])
    second = None
    try:
        wait_for(logs[0], ["all 2 agents connected"], timeout=30)
        second = spawn(*args, log=logs[1])
        for log in logs:
            wait_for(log, [AGENTS_SAID, SCHED_SAID], timeout=40)
        fought = [log.read_text(errors="replace") for log in logs]
        time.sleep(6)  # the fight goes on: a second each, a dozen retries more
        for log, before in zip(logs, fought, strict=True):
            text = log.read_text(errors="replace")
            assert text.count(AGENTS_SAID) == 1 and text.count(SCHED_SAID) == 1, text
            # Said once, its retries are not news: nothing new of its own while it goes on.
            assert own_lines(text) == own_lines(before), text
        stop_process(second)
        # The one left says the takeovers stopped, or its log ends on the fight.
        text = wait_for(logs[0], ["scheduler: connected to the MQTT broker",
                                  "the takeovers stopped",
                                  "all 2 agents connected to the broker"], timeout=60)
        assert text.count("the takeovers stopped") == 1, text
    finally:
        if second is not None:
            stop_process(second)
        stop_process(first)
