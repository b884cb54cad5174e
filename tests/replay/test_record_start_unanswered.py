"""`fleetdeck record` whose broker accepts the connection and the subscription but leaves the
recording's REBIRTH publish unanswered (a 2026-12-07 drill: three records started at once on a
loaded host, one ended "the MQTT broker … did not answer in time"). It failed in one sentence,
but left the recording's header as a file and its empty index beside it, and the same command
again was refused: "already exists; pick another --out, or pass --force". A failed start
leaves no file behind, as ``record``'s docstring says.

The broker is a few lines of MQTT 3.1.1 here: CONNACK, SUBACK, PINGRESP, and never a PUBACK."""

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from fleetdeck.brokerurl import BrokerURL
from fleetdeck.console.replay import record
from fleetdeck.errors import UserError


async def _packet(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    first = (await reader.readexactly(1))[0]
    length, shift = 0, 0
    while True:
        byte = (await reader.readexactly(1))[0]
        length |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    return first >> 4, await reader.readexactly(length)


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
        while True:
            kind, body = await _packet(reader)
            if kind == 1:  # CONNECT
                writer.write(b"\x20\x02\x00\x00")
            elif kind == 8:  # SUBSCRIBE: granted QoS 1 for each filter
                writer.write(bytes([0x90, 3]) + body[:2] + b"\x01")
            elif kind == 12:  # PINGREQ
                writer.write(b"\xd0\x00")
            # PUBLISH (3) and the rest: never answered
            await writer.drain()


@pytest.fixture
async def silent_puback() -> AsyncIterator[BrokerURL]:
    server = await asyncio.start_server(_serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield BrokerURL("127.0.0.1", port)
    finally:
        server.close()


@pytest.mark.timeout(60)
async def test_a_start_the_broker_left_unanswered_leaves_no_recording(silent_puback, tmp_path):
    out = tmp_path / "rec.jsonl.gz"
    with pytest.raises(UserError) as err:
        await record(silent_puback, "x", out, 30.0, say=lambda _: None)
    assert "did not answer in time" in str(err.value), err.value
    assert sorted(p.name for p in tmp_path.iterdir()) == []
