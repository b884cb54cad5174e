"""The deaf check's judgement (console/deaf_check.py) against a stand-in feed and fleet: how long
a look listens, when it drops the console's connection, and how often."""

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from fleetdeck.console import deaf_check
from fleetdeck.console.deaf_check import DEAF, HUNG, LOOKING, SILENT, DeafCheck


@dataclass
class Digest:
    every_s: float


@dataclass
class Node:
    interval_s: float = 1.0
    digest: Digest | None = None
    online: bool = True


@dataclass
class State:
    last_update: float | None
    nodes: dict[str, Node]


@dataclass
class Conn:
    state: str = "connected"
    since: float = 100.0
    """When this connection was made (its subscription with it)."""


@dataclass
class Link:
    filters: list[str] = field(default_factory=lambda: ["fleetdeck/v1/c/node/+/telemetry"])
    drops: list[str] = field(default_factory=list)

    def drop(self, why: str) -> None:
        self.drops.append(why)


@dataclass
class Feed:
    conn: Conn = field(default_factory=Conn)
    link: Link = field(default_factory=Link)
    probe_topic: str | None = None
    url: Any = None
    received: int = 0

    def broker_heard_s(self) -> float:
        return 0.5  # the broker answers its pings


def looks(monkeypatch: pytest.MonkeyPatch, heard: bool,
          during: Any = None) -> list[float]:
    """Each look's listening time; every look hears ``heard`` at once (``during`` runs then)."""
    listened: list[float] = []

    async def live_heard(_link: Any, _got: Any, listen_s: float) -> bool:
        listened.append(listen_s)
        if during is not None:
            during()
        return heard

    monkeypatch.setattr(deaf_check, "live_heard", live_heard)
    monkeypatch.setattr(deaf_check, "MqttLink", lambda *a, **k: None)
    return listened


async def step(check: DeafCheck, feed: Feed, state: State, now: float) -> None:
    check.watch(feed, state, now)  # type: ignore[arg-type]
    for _ in range(3):
        await asyncio.sleep(0)


async def test_a_look_on_digests_listens_for_two_digest_periods(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Digests every 10 s: a 3 s look (two sample intervals) heard none most times and said
    # "the fleet is silent" of a console that was deaf.
    listened = looks(monkeypatch, heard=False)
    state = State(last_update=0.0, nodes={f"n{i}": Node(1.0, Digest(10.0)) for i in range(4)})
    await step(DeafCheck(lambda *a, **k: None), Feed(), state, 25.0)
    assert listened == [20.0]


async def test_a_console_still_deaf_after_its_reconnect_is_not_dropped_at_every_tick(
        monkeypatch: pytest.MonkeyPatch) -> None:
    looks(monkeypatch, heard=True)
    feed, state = Feed(), State(last_update=0.0, nodes={"n1": Node()})
    check = DeafCheck(lambda *a, **k: None)
    for t in range(10, 40):  # 30 s of ticks, the broker delivering to a fresh look each time
        await step(check, feed, state, float(t))
    assert check.verdict == DEAF
    assert len(feed.link.drops) == 1, feed.link.drops


async def test_a_console_that_receives_what_the_state_does_not_take_is_not_deaf(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Malformed messages (an agent of another version) come to this console and to the look
    # alike; the fleet's state takes none of them, so nothing counts as heard.
    feed, state = Feed(), State(last_update=0.0, nodes={"n1": Node()})
    looks(monkeypatch, heard=True, during=lambda: setattr(feed, "received", feed.received + 1))
    check = DeafCheck(lambda *a, **k: None)
    for t in range(10, 20):
        await step(check, feed, state, float(t))
    assert check.verdict == SILENT
    assert feed.link.drops == []


async def test_a_look_in_flight_ends_with_the_session(monkeypatch: pytest.MonkeyPatch) -> None:
    # Left to the loop's shutdown, a front end that closed its session and went on kept the
    # look's task (and its second connection) pending.
    started = asyncio.Event()
    ended: list[str] = []

    async def live_heard(_link: Any, _got: Any, _listen_s: float) -> bool:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            ended.append("cancelled")
            raise
        return False

    monkeypatch.setattr(deaf_check, "live_heard", live_heard)
    monkeypatch.setattr(deaf_check, "MqttLink", lambda *a, **k: None)
    check = DeafCheck(lambda *a, **k: None)
    await step(check, Feed(), State(last_update=0.0, nodes={"n1": Node()}), 10.0)
    await asyncio.wait_for(started.wait(), 5)
    await check.close()
    assert ended == ["cancelled"]


async def test_judge_gives_the_headers_words_and_status_jsons_verdict(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``judge`` is what the TUI's header and ``status --json``'s ``quiet_link`` say."""
    listened = looks(monkeypatch, heard=False)
    feed, state = Feed(), State(last_update=100.0, nodes={"n1": Node()})
    check = DeafCheck(lambda *a, **k: None)
    assert check.judge(feed, state, 104.0) is None  # type: ignore[arg-type]  # heard lately
    await step(check, feed, state, 110.0)  # quiet 10 s, the broker answering: a look starts
    looking = check.judge(feed, state, 110.0)  # type: ignore[arg-type]
    assert looking is not None and looking.verdict == LOOKING
    assert looking.as_json() == {"since": 100.0, "quiet_s": 10.0, "verdict": "looking",
                                 "text": "the broker answers pings; looking whether the fleet "
                                         "publishes"}
    await step(check, feed, state, 111.0)  # the look heard nothing either
    silent = check.judge(feed, state, 111.0)  # type: ignore[arg-type]
    assert silent is not None and silent.verdict == SILENT and len(listened) == 1
    assert "a fresh subscription hears nothing either" in silent.text

    class Mute(Feed):
        def broker_heard_s(self) -> float:
            return 11.0  # not even a ping's answer since the fleet's last word

    hung = check.judge(Mute(), state, 111.0)  # type: ignore[arg-type]
    assert hung is not None and (hung.verdict, hung.text) == (HUNG, "broker hung?")


async def test_a_one_shot_session_takes_its_own_quiet_for_the_fleets_silence(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A one-shot command's session (``status``) subscribed for its watch: its quiet is the
    fleet's silence, with no look through a second connection."""
    listened = looks(monkeypatch, heard=True)
    feed, state = Feed(), State(last_update=100.0, nodes={"n1": Node()})
    check = DeafCheck(lambda *a, **k: None, may_look=False)
    for t in range(104, 130):
        await step(check, feed, state, float(t))
    assert listened == [] and check.looks == 0 and feed.link.drops == []
    quiet = check.judge(feed, state, 130.0)  # type: ignore[arg-type]
    assert quiet is not None and quiet.verdict == SILENT and quiet.quiet_s == 30.0
    assert "this watch's own subscription" in quiet.text


async def test_a_one_shot_session_watching_long_looks_once_its_subscription_is_not_fresh(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``status --wait`` goes up to a day: an hour into the watch its subscription is no
    fresher than the console's that went deaf (the drill's, after 490 s), and its quiet was
    called "the fleet is silent" with no look. Past ``LOOK_AGAIN_S`` of its connection it
    looks as the console does."""
    listened = looks(monkeypatch, heard=True)
    feed, state = Feed(conn=Conn(since=0.0)), State(last_update=100.0, nodes={"n1": Node()})
    check = DeafCheck(lambda *a, **k: None, may_look=False)
    await step(check, feed, state, 110.0)  # a look starts
    await step(check, feed, state, 111.0)  # and heard the fleet: deaf, the link dropped
    assert len(listened) == 1 and feed.link.drops, (listened, feed.link.drops)
    quiet = check.judge(feed, state, 111.0)  # type: ignore[arg-type]
    assert quiet is not None and quiet.verdict == DEAF, quiet
