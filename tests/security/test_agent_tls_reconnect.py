"""An agent on the shipped TLS listener while its broker restarts: it comes back within
seconds (jittered back-off, reset after each session) and its journal says it is connected
again, not only "cannot reach …; retrying" as its last word."""

import asyncio
import time

from fleetdeck.broker import free_port
from fleetdeck.brokerurl import parse_broker_url, with_tls
from tests.conftest import spawn, stop_process
from tests.security.deploy import needs_tools, secured_broker
from tests.test_agent_reconnect import CLUSTER, NODE, next_birth

pytestmark = needs_tools


async def test_an_agent_over_tls_reconnects_and_says_so_after_a_broker_restart(tmp_path):
    (tmp_path / "b").mkdir()
    with secured_broker(tmp_path / "b", users=["console", NODE],
                        tls_port=free_port()) as (broker, creds, tls_port, work):
        ca = str(work / "pki" / "ca.crt")
        log = tmp_path / "agent.log"
        proc = spawn("agent", "--source", "sim", "--node-id", NODE, "--cluster", CLUSTER,
                     "--broker", f"mqtts://{NODE}:{creds[NODE]}@127.0.0.1:{tls_port}",
                     "--ca", ca, "--interval", "0.5", "--keepalive", "2",
                     "--state-dir", str(tmp_path / "state"), log=log)
        watch = with_tls(parse_broker_url(
            f"mqtts://console:{creds['console']}@127.0.0.1:{tls_port}"), ca, None, None)
        try:
            birth = await next_birth(watch, 0, 20)
            broker.kill()
            await asyncio.sleep(2.5)  # a few failed tries: "cannot reach …; retrying"
            started = time.time()
            broker.start()
            birth = await next_birth(watch, birth.bdSeq, 15)
            assert birth.ts / 1000 - started < 6, "slow reconnect over TLS"
            await asyncio.sleep(0.5)
        finally:
            stop_process(proc)
    text = log.read_text()
    assert "retrying in" in text, text
    after = text[text.rindex("retrying in"):]
    assert f"{NODE}: connected to the MQTT broker at mqtts://{NODE}@127.0.0.1:{tls_port} again" \
        in after, text
    assert creds[NODE] not in text
