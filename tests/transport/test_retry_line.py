"""A long-running reader's reconnect line (``MqttLink.run``: collect, the console's log) is one
sentence, as the agent's is: "…: connection refused (is it running?); retrying in 1.2 s". It
read "(is it running?). retrying in 1.2 s", a full stop and a lower-case word, in a newcomer's
`fleetdeck collect` log while the broker was down."""

import asyncio
import logging

from fleetdeck.broker import free_port
from fleetdeck.brokerurl import BrokerURL
from fleetdeck.transport import MqttLink


def test_the_retry_line_reads_as_one_sentence(caplog):
    link = MqttLink(BrokerURL("127.0.0.1", free_port()), "t", [], lambda *a: None)
    link.max_backoff_s = 0.05  # two refusals well inside the test's second

    async def main() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(link.run(stop))
        for _ in range(100):
            if any("retrying in" in r.getMessage() for r in caplog.records):
                break
            await asyncio.sleep(0.02)
        stop.set()
        await asyncio.wait_for(task, 5)

    with caplog.at_level(logging.WARNING, logger="fleetdeck.transport"):
        asyncio.run(main())
    said = [r.getMessage() for r in caplog.records if "retrying in" in r.getMessage()]
    assert said, [r.getMessage() for r in caplog.records]
    assert "connection refused" in said[0] and "; retrying in " in said[0], said
    assert ". retrying" not in said[0], said


def _refused_lines(link: MqttLink, caplog, tries: int) -> list[tuple[int, str]]:
    """The link's warnings over ``tries`` refused connects, each with the tries made when it
    was said."""
    said: list[tuple[int, str]] = []

    class Seen(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append((link.failures, record.getMessage()))

    async def main() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(link.run(stop))
        for _ in range(500):
            if link.failures >= tries:
                break
            await asyncio.sleep(0.01)
        stop.set()
        await asyncio.wait_for(task, 5)

    handler = Seen(logging.WARNING)
    logger = logging.getLogger("fleetdeck.transport")
    logger.addHandler(handler)
    try:
        with caplog.at_level(logging.WARNING, logger="fleetdeck.transport"):
            asyncio.run(main())
    finally:
        logger.removeHandler(handler)
    return said


def test_a_long_running_reader_says_the_first_refusal_then_limits_its_repeats(caplog):
    """``collect``'s log said nothing of the first refusal (a one-shot command reports that
    one itself) and then the same sentence at every try; the agent says a reason at once,
    once more with "said next in 5 min", then nothing until it changes or 5 minutes pass."""
    link = MqttLink(BrokerURL("127.0.0.1", free_port()), "t", [], lambda *a: None)
    link.max_backoff_s = 0.02
    link.say_first = True
    said = _refused_lines(link, caplog, 8)
    assert len(said) == 2, said
    (first_try, first), (second_try, again) = said
    assert first_try == 1 and "connection refused" in first and "again" not in first, said
    assert second_try == 2 and again.endswith("(said next in 5 min unless it changes)"), said


def test_a_one_shot_reader_leaves_the_first_refusal_to_its_caller(caplog):
    link = MqttLink(BrokerURL("127.0.0.1", free_port()), "t", [], lambda *a: None)
    link.max_backoff_s = 0.02
    said = _refused_lines(link, caplog, 6)
    assert [n for n, _ in said] == [2, 3], said


def test_collect_says_its_first_failed_connect_at_once(tmp_path):
    """A ``collect`` whose broker closes every connection: its first warning comes before its
    second try (the back-off waits 0.5-1 s), not a second or two in."""
    import socket
    import subprocess
    import threading
    import time

    from tests.conftest import fleetdeck_cmd, stop_process

    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    tries: list[float] = []

    def refuse() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            tries.append(time.monotonic())
            conn.close()

    threading.Thread(target=refuse, daemon=True).start()
    proc = subprocess.Popen(fleetdeck_cmd("collect", "--broker", f"mqtt://127.0.0.1:{port}",
                                          "--cluster", "x", "--db", str(tmp_path / "x.db")),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "retrying in" in line:
                seen = len(tries)
                break
        else:
            raise AssertionError("no retry line")
    finally:
        stop_process(proc)
        server.close()
    assert seen == 1 and "again" not in line, (seen, line)
