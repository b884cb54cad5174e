"""The console session sends what its ingest wants: one signed ``keyframe`` command per node."""


from fleetdeck.console.session import ConsoleSession
from fleetdeck.protocol import codec, signing
from fleetdeck.protocol.messages import Command, CommandOp
from fleetdeck.protocol.topics import Kind
from tests.helpers import FakeNode

KEY = b"k" * 32


class Sent:
    def __init__(self) -> None:
        self.commands: list[tuple[str, Command]] = []

    async def __call__(self, kind: Kind, subject: str, payload: bytes) -> None:
        self.commands.append((subject, codec.decode(Command, payload)))


async def test_deltas_without_their_keyframe_make_one_signed_ask_per_node_at_a_time() -> None:
    nodes = [FakeNode("gpu0001", cluster="kf"), FakeNode("gpu0002", cluster="kf")]
    sent = Sent()
    session = ConsoleSession("kf", clock=lambda: nodes[0].now, publisher=sent, operator="t",
                             command_key=KEY)
    for node in nodes:
        node.agent.telemetry_payload()  # the keyframes this console never saw
    for _ in range(3):
        for node in nodes:
            node.now += 1.0
            session.ingest.handle(node.topic(Kind.TELEMETRY), node.agent.telemetry_payload(),
                                  node.now)
        session.tick()
        await session.flush()
    asks = [(subject, cmd) for subject, cmd in sent.commands if cmd.op is CommandOp.KEYFRAME]
    assert sorted(subject for subject, _ in asks) == ["gpu0001", "gpu0002"]  # throttled: once
    for subject, cmd in asks:
        assert cmd.target == subject and cmd.args.reason.startswith("no keyframe 1 of session")
        assert signing.check(cmd, KEY, int(nodes[0].now * 1000)) == ""
    assert session.ingest.keyframe_missing == 6 and not session.ingest.keyframe_wanted
