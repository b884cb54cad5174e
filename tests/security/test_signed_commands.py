"""Agents configured with a command key obey only signed, timely, never-seen commands."""

import time
import uuid

import aiomqtt
import pytest

from fleetdeck.protocol import codec, signing
from fleetdeck.protocol.messages import Command, CommandArgs, CommandOp
from fleetdeck.protocol.topics import Kind, topic_for
from tests.conftest import eventually, spawn, stop_process
from tests.test_agent_lifecycle import Watcher, is_ok, node

CLUSTER = "life"  # the Watcher's cluster
KEY = b"k" * 32


def drain(cmd_id: str, *, issued_ms: int | None = None, lifetime_s: float = 30,
          target: str = "gpu0001") -> Command:
    now = issued_ms if issued_ms is not None else int(time.time() * 1000)
    return Command(cmd_id=cmd_id, op=CommandOp.DRAIN, target=target,
                   args=CommandArgs(reason="signed test"), issued_by="alice", issued_at=now,
                   expires_at=now + int(lifetime_s * 1000))


async def publish(url, cmd: Command) -> None:
    async with aiomqtt.Client(url.host, url.port, identifier=f"op-{uuid.uuid4().hex[:6]}") as c:
        await c.publish(topic_for(CLUSTER, Kind.CMD, cmd.target), codec.encode(cmd), qos=1)


def test_sign_and_check_round_trip():
    cmd = signing.sign(drain("a"), KEY)
    now = cmd.issued_at
    assert signing.check(cmd, KEY, now) == ""
    assert "bad signature" in signing.check(cmd, b"x" * 32, now)
    tampered = cmd.model_copy(update={"target": "gpu0002"})
    assert "bad signature" in signing.check(tampered, KEY, now)
    assert "unsigned" in signing.check(drain("b"), KEY, now)
    # What to do, not only what is wrong: the reason reaches the CLI, the console and the audit.
    assert "--command-key FILE or $FLEETDECK_COMMAND_KEY_FILE" in signing.check(drain("b"), KEY,
                                                                               now)
    assert "the agents' --command-key" in signing.check(cmd, b"x" * 32, now)
    long = signing.sign(drain("c", lifetime_s=3600), KEY)
    assert "lifetime" in signing.check(long, KEY, now)
    future = signing.sign(drain("d", issued_ms=now + 5 * 60_000), KEY)
    assert "future" in signing.check(future, KEY, now)


async def test_agent_rejects_forged_expired_and_replayed_commands(mosquitto, tmp_path):
    key_file = tmp_path / "command.key"
    key_file.write_bytes(KEY)
    proc = spawn("agent", "--broker", str(mosquitto.url), "--cluster", CLUSTER, "--node-id",
                 "gpu0001", "--command-key", str(key_file), log=tmp_path / "agent.log")
    try:
        async with Watcher(mosquitto.url) as w:
            await w.until(is_ok, message="agent online")
            now = int(time.time() * 1000)
            bad = {
                "unsigned": drain("unsigned"),
                "forged": signing.sign(drain("forged"), b"not-the-key-0123456789"),
                # Past the 60 s a node's clock may lead a console's (agents/guard.py).
                "expired": signing.sign(drain("expired", issued_ms=now - 120_000,
                                              lifetime_s=10), KEY),
                "tampered": signing.sign(drain("tampered"), KEY).model_copy(
                    update={"args": CommandArgs(reason="changed in flight")}),
            }
            for cmd in bad.values():
                await publish(mosquitto.url, cmd)
            await w.until(lambda s: {a.cmd_id for a in w.acks} >= set(bad),
                          message="every bad command answered")
            by_id = {a.cmd_id: a for a in w.acks}
            assert {k: by_id[k].result.value for k in bad} == dict.fromkeys(bad, "rejected")
            assert "unsigned" in by_id["unsigned"].reason
            assert "bad signature" in by_id["forged"].reason
            assert "bad signature" in by_id["tampered"].reason
            assert "expired" in by_id["expired"].reason
            assert node(w.state).drain.state.value == "none"

            good = signing.sign(drain("good"), KEY)
            await publish(mosquitto.url, good)
            await w.until(lambda s: node(s).drain.state.value == "drained",
                          message="signed drain obeyed")
            # A captured copy replayed later: answered from memory, not executed again.
            await publish(mosquitto.url, good)
            await w.until(lambda s: len([a for a in w.acks if a.cmd_id == "good"]) >= 3,
                          message="replay answered")
            assert [a.result.value for a in w.acks if a.cmd_id == "good"][:2] == [
                "accepted", "done"]
            await eventually(lambda: w.tick() or any(e.kind == "drain" for e in w.state.events),
                             5, message="the one drain event")
            assert len([e for e in w.state.events if e.kind == "drain"]) == 1
        log = (tmp_path / "agent.log").read_text()
        assert "rejected command forged from alice: bad signature" in log
    finally:
        stop_process(proc)


@pytest.mark.parametrize("size", [0, 8])
def test_short_keys_are_refused(tmp_path, size):
    from fleetdeck.errors import UserError

    key = tmp_path / "k"
    key.write_bytes(b"x" * size)
    with pytest.raises(UserError, match="shorter than 16 bytes"):
        signing.load_key(key)
