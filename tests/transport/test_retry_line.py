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
