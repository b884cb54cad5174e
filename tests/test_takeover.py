"""TakeoverWatch on its own clock (docs/reliability.md, "Two clients with one client id"): the
drills with a real broker (tests/test_agent_reconnect.py, tests/sim/test_sim_duplicate.py) take
a minute each and cover one cadence; these cover the patterns a review found misread."""

from fleetdeck.brokerurl import parse_broker_url
from fleetdeck.takeover import TakeoverWatch


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def session(watch: TakeoverWatch, clock: Clock, held_s: float) -> bool:
    """One connection the broker accepted and dropped ``held_s`` later."""
    watch.accepted()
    clock.t += held_s
    return watch.lost(True)


def test_three_short_connections_are_said_once():
    clock = Clock()
    watch = TakeoverWatch(clock=clock)
    said = [session(watch, clock, 1.0) for _ in range(20)]
    assert said == [False, False, True] + [False] * 17
    assert watch.active


def test_a_crash_looping_broker_is_no_second_client():
    """Up ~4 s, then refused while it restarts: the agent was told of a client with its id
    after three cycles. A refused or unreachable connect ends the count."""
    clock = Clock()
    watch = TakeoverWatch(clock=clock)
    for _ in range(10):
        assert not session(watch, clock, 4.0)
        for _ in range(3):
            clock.t += 1.0
            assert not watch.lost(False)  # connection refused: the broker restarts
    assert not watch.said


def test_a_connect_that_timed_out_keeps_the_count():
    """A broker too busy to answer in time says nothing either way: the takeover is said."""
    clock = Clock()
    watch = TakeoverWatch(clock=clock)
    results = []
    for _ in range(3):
        results.append(session(watch, clock, 1.0))
        clock.t += 1.0
        watch.lost(False, timed_out=True)
    assert results == [False, False, True]


def test_a_peer_reconnecting_after_9_to_11_s_does_not_flap():
    """Connections held 9 or 11 s while both clients are there: "dropped …" and "the
    takeovers stopped" alternated, a pair of lines every minute or so."""
    clock = Clock()
    watch = TakeoverWatch(clock=clock)
    lines = []
    for held in [9, 9, 9, 11, 9, 9, 9, 11, 9, 9, 9, 11, 9, 9, 9]:
        watch.accepted()
        clock.t += held
        if watch.ended():
            lines.append("stopped")
        if watch.lost(True):
            lines.append("said")
    assert lines == ["said"]
    assert watch.active


def test_the_episode_ends_once_a_connection_holds_30_s():
    clock = Clock()
    watch = TakeoverWatch(clock=clock)
    for _ in range(3):
        session(watch, clock, 1.0)
    watch.accepted()
    clock.t += 29.0
    assert not watch.ended() and watch.active
    clock.t += 1.0
    assert watch.ended() and not watch.active
    assert not watch.ended()  # said once
    # A new fight is news again.
    assert [session(watch, clock, 1.0) for _ in range(3)] == [False, False, True]


def test_an_episode_that_lasts_is_said_again_every_few_minutes():
    """A broker that drops the client for good (an oversize packet, mosquitto's
    max_packet_size): said once, then nothing for as long as it lasted while nothing was
    published. A reminder every 5 min says how many and for how long."""
    clock = Clock()
    watch = TakeoverWatch(clock=clock)
    url = parse_broker_url("mqtt://broker.example:1883")
    reminders = []
    for _ in range(16 * 60):  # a connection a second for 16 min
        session(watch, clock, 0.5)
        clock.t += 0.5
        if watch.remind():
            reminders.append(watch.reminder(url, "fd-demo-gpu0001"))
    assert len(reminders) == 3, reminders
    assert "client id fd-demo-gpu0001" in reminders[0]
    assert "in 5 min" in reminders[0] and "in 15 min" in reminders[2]
    assert "already connected, closing old connection" in reminders[0]
    said = watch.sentence(url, "fd-demo-gpu0001", "a second agent?")
    assert "The broker's log says why ('already connected, closing old connection'" in said


def test_a_simulators_agents_are_said_once_then_reminded_for_the_fleet(caplog):
    """A simulator's thousands of agents each remind every 5 min: one line for the fleet."""
    from fleetdeck.agents.fleet import RetryLog

    clock = Clock()
    url = parse_broker_url("mqtt://broker.example:1883")
    retry_log = RetryLog(url, 64, clock=clock)
    caplog.set_level("WARNING")
    for minute in range(11):
        for node in range(64):
            retry_log.takeover(f"gpu{node:04d}", f"said at minute {minute}")
        clock.t += 60.0
    said = [r.getMessage() for r in caplog.records if "said at minute" in r.getMessage()]
    assert [line.rsplit(" ", 1)[-1] for line in said] == ["0", "5", "10"], said


def test_drops_right_after_the_largest_publish_read_as_a_packet_too_large():
    """Mosquitto with a max_packet_size below an agent's keyframe drops the agent as it reads
    it, once a second: the journal pointed at a second agent with the node's id (a
    2026-12-07 drill). Every drop right after the connection's largest publish says it."""
    url = parse_broker_url("mqtt://broker:1883")
    clock = Clock()
    watch = TakeoverWatch(clock=clock)
    for _ in range(2):
        watch.accepted()
        clock.t += 0.8
        assert not watch.lost(True, after_publish=3690)
    watch.accepted()
    clock.t += 0.8
    assert watch.lost(True, after_publish=3664)
    said = watch.sentence(url, "fd-demo-m01", "a second agent?")
    assert "max_packet_size is most likely below that" in said, said
    assert "at least 3,664 bytes" in said and "or another client may be connected" in said

    # One drop that came at another moment: a takeover's pattern, said as before.
    watch = TakeoverWatch(clock=clock)
    for after in (3690, None, 3690):
        watch.accepted()
        clock.t += 0.8
        watch.lost(True, after_publish=after)
    said = watch.sentence(url, "fd-demo-m01", "a second agent?")
    assert "max_packet_size" not in said and "another client may be connected" in said


async def test_a_takeover_right_after_a_sample_the_broker_took_before_is_no_packet_too_large(
        monkeypatch):
    """Two agents of one node (wire 1, 0.5 s samples of ~10 KB each, ties counting as the
    largest so far): each kicked by the other's CONNECT right after a sample, 2 of 12 agents in
    a minute read "max_packet_size is most likely below that" of a broker with none set (a
    review; its log said 'already connected, closing old connection'). A publish no larger than
    one the broker read (its connection outlived it) cannot be over its max_packet_size."""
    import contextlib

    import aiomqtt

    from fleetdeck import brokerurl
    from fleetdeck.brokerurl import make_client
    from fleetdeck.takeover import dropped_after_publish

    now = [500.0]
    monkeypatch.setattr(brokerurl.time, "monotonic", lambda: now[0])
    client = make_client(parse_broker_url("mqtt://127.0.0.1:1"), "fd-t-gpu0001")
    for size in (10_113, 10_104, 10_113):  # samples 0.5 s apart, the connection up all along
        with contextlib.suppress(aiomqtt.MqttError):  # not connected: the bookkeeping is done
            await client.publish("t", b"x" * size)
        now[0] += 0.5
    assert client.taken == 10_113
    last = client.last_sent
    assert last is not None and last[1] == 10_113 and last[2]  # a tie: "the largest so far"
    # Kicked 0.1 s after the third sample: a size the broker took, so no oversize packet.
    assert dropped_after_publish(last, last[0] + 0.1, client.taken) is None
    # A keyframe larger than anything taken, dropped as it was read: still said.
    assert dropped_after_publish((500.0, 3700, True), 500.05, 3000) == 3700
    assert dropped_after_publish((500.0, 3700, True), 500.4, 3000) is None
