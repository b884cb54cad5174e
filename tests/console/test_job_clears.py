"""An empty payload on ``job/<id>/status`` withdraws the job only where it cleared the
retained status (docs/protocol.md, JobStatus). A 3.1.1 subscriber gets a retained clear with
the retain flag off, as it gets an empty publish that cleared nothing (``mosquitto_pub -n``
without ``-r``): that one withdrew a running job from the console that heard it while every
console started later read it running. The console asks the broker for the job's retained
status again and keeps the job when it comes (``ConsoleSession._ask_job_statuses``)."""

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiomqtt
import pytest

from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.state import JOB_CLEAR_CONFIRM_S
from fleetdeck.protocol import codec
from fleetdeck.protocol.topics import Kind, topic_for
from tests.conftest import eventually, unsubscribed
from tests.tui.fleet import CLUSTER, Clock, job_status, publish_job

KEPT = ("job 4104 not withdrawn: an empty message on its status topic was followed by its "
        "status (an empty message that was not retained clears nothing)")


def job_lines(session: ConsoleSession) -> list[str]:
    return [ln.text for ln in session.log.lines() if ln.kind == "job"]


@dataclass
class Watched:
    session: ConsoleSession
    pub: aiomqtt.Client
    topic: str
    client_id: str


@asynccontextmanager
async def job_watched(broker: Any, name: str) -> AsyncIterator[Watched]:
    """A console watching a live broker that holds job 4104's retained status (heard), and a
    publisher on the job's topic."""
    clock = Clock()
    topic = topic_for(CLUSTER, Kind.JOB, "4104")
    payload = codec.encode(job_status("4104", ["gpu0001"], clock))
    client_id = f"{name}-{uuid.uuid4().hex[:6]}"
    session = ConsoleSession(CLUSTER, url=broker.url, operator="test", client_id=client_id,
                             follow_up=False)
    stop = asyncio.Event()
    watcher = asyncio.create_task(session.watch(stop, tick_s=0.2))
    try:
        async with aiomqtt.Client(broker.url.host, broker.url.port,
                                  identifier=f"pub-{uuid.uuid4().hex[:6]}") as pub:
            await pub.publish(topic, payload, qos=1, retain=True)
            await eventually(lambda: "4104" in session.state.jobs, 20, message="job heard")
            yield Watched(session, pub, topic, client_id)
    finally:
        stop.set()
        await asyncio.gather(watcher, return_exceptions=True)


def test_an_empty_job_status_followed_by_its_status_keeps_the_job():
    """The broker's answer to the ask (the status it still retains) comes within
    ``JOB_CLEAR_CONFIRM_S``: the job stays, and the timeline says why nothing changed."""
    clock = Clock()
    session = ConsoleSession(CLUSTER, clock=clock, follow_up=False)
    job = job_status("4104", ["gpu0001", "gpu0002"], clock)
    publish_job(session.ingest, job, clock)
    session.tick()
    session.ingest.handle(topic_for(CLUSTER, Kind.JOB, "4104"), b"", clock())
    session.tick()
    clock.advance(0.5)
    publish_job(session.ingest, job, clock)  # the retained status, sent again
    session.tick()
    clock.advance(JOB_CLEAR_CONFIRM_S)
    session.tick()
    assert "4104" in session.state.jobs
    assert job_lines(session) == [KEPT]
    assert session.state.jobs_clearing == {}


@pytest.mark.timeout(60)
async def test_only_a_retained_clear_withdraws_a_job_on_a_live_broker(telling_mosquitto):
    broker = telling_mosquitto
    async with job_watched(broker, "clears") as w:
        session, pub, topic, client_id = w.session, w.pub, w.topic, w.client_id
        await pub.publish(topic, b"", qos=1, retain=False)  # clears nothing
        await eventually(lambda: KEPT in job_lines(session), JOB_CLEAR_CONFIRM_S + 10,
                         message="kept: the broker sent the status it retains")
        assert "4104" in session.state.jobs
        await eventually(lambda: unsubscribed(broker, client_id, topic), 10,
                         message="the job's own topic let go")
        await pub.publish(topic, b"", qos=1, retain=True)  # the protocol's clear
        await eventually(lambda: "4104" not in session.state.jobs,
                         JOB_CLEAR_CONFIRM_S + 10, message="withdrawn")
        last = job_lines(session)[-1]
        assert last.startswith("job 4104 withdrawn (its retained status cleared) while it "
                               "last read R"), job_lines(session)


def test_a_status_heard_before_a_second_empty_message_keeps_the_job():
    """Under a flood of empty publishes the broker's answer (the status it retains) lands in
    a tick with another empty message after it: the status was heard, so the job is kept and
    the later empty message is a clear of its own, waited for from when it came. Before, the
    status was lost under it and the first empty's wait withdrew a job the broker retained
    (a review)."""
    clock = Clock()
    session = ConsoleSession(CLUSTER, clock=clock, follow_up=False)
    job = job_status("4104", ["gpu0001", "gpu0002"], clock)
    topic = topic_for(CLUSTER, Kind.JOB, "4104")
    publish_job(session.ingest, job, clock)
    session.tick()
    session.ingest.handle(topic, b"", clock())
    session.tick()
    clock.advance(0.5)
    publish_job(session.ingest, job, clock)  # the retained status, sent again
    session.ingest.handle(topic, b"", clock())  # the flood's next empty message
    session.tick()
    assert job_lines(session) == [KEPT]
    assert session.state.jobs_clearing == {"4104": clock()}
    clock.advance(JOB_CLEAR_CONFIRM_S - 0.5)  # the first empty's wait is over
    session.tick()
    assert "4104" in session.state.jobs
    clock.advance(0.5)  # the second's too, with no status of it: that clear stands
    session.tick()
    assert "4104" not in session.state.jobs


def test_no_job_is_withdrawn_for_a_wait_the_console_could_not_hear_its_answer():
    """Cut off from the broker (or stopped) after the empty payload, the console cannot hear
    the status the broker retains: that time does not count towards ``JOB_CLEAR_CONFIRM_S``
    (``unseen_s``). Before, the job was withdrawn ("nothing reports it now") while the
    connection was down, and came back with the retained burst of the reconnect."""
    clock = Clock()
    session = ConsoleSession(CLUSTER, clock=clock, follow_up=False)
    job = job_status("4104", ["gpu0001", "gpu0002"], clock)
    publish_job(session.ingest, job, clock)
    publish_job(session.ingest, job_status("4105", ["gpu0003"], clock), clock)
    session.tick()
    for job_id in ("4104", "4105"):
        session.ingest.handle(topic_for(CLUSTER, Kind.JOB, job_id), b"", clock())
    session.tick()
    clock.advance(1)
    session.state.lose_sight(clock())
    clock.advance(JOB_CLEAR_CONFIRM_S * 4)
    session.tick()
    assert {"4104", "4105"} <= set(session.state.jobs) and job_lines(session) == []
    session.state.regain_sight(clock(), 0.0)
    clock.advance(1)
    publish_job(session.ingest, job, clock)  # the reconnect's retained burst: 4104 only
    session.tick()
    assert "4104" in session.state.jobs and job_lines(session) == [KEPT]
    assert "4105" in session.state.jobs  # 2 s heard of its wait so far
    clock.advance(JOB_CLEAR_CONFIRM_S - 2)
    session.tick()
    assert "4105" not in session.state.jobs and "4104" in session.state.jobs


def test_a_job_kept_again_and_again_is_said_once_a_minute():
    """Each empty message the broker's answer followed kept the job with a timeline line kept
    in the store: a flood of them was a flood of lines (``JOB_KEPT_SAID_S``)."""
    from fleetdeck.console.session import JOB_KEPT_SAID_S

    clock = Clock()
    session = ConsoleSession(CLUSTER, clock=clock, follow_up=False)
    job = job_status("4104", ["gpu0001", "gpu0002"], clock)
    publish_job(session.ingest, job, clock)
    session.tick()
    for _ in range(int(JOB_KEPT_SAID_S) + 1):
        session.ingest.handle(topic_for(CLUSTER, Kind.JOB, "4104"), b"", clock())
        session.tick()
        clock.advance(0.5)
        publish_job(session.ingest, job, clock)
        session.tick()
        clock.advance(0.5)
    assert "4104" in session.state.jobs
    assert job_lines(session) == [KEPT, KEPT]  # at 0.5 s and at 60.5 s


@pytest.mark.timeout(60)
async def test_a_flood_of_empty_publishes_does_not_withdraw_a_retained_job(telling_mosquitto):
    """An empty publish (not retained) every 50 ms for longer than ``JOB_CLEAR_CONFIRM_S``:
    each answer of the broker comes with more empty messages after it in the same tick. The
    job stays, and its own topic is let go once the flood stops."""
    broker = telling_mosquitto
    async with job_watched(broker, "flood") as w:
        session, pub, topic, client_id = w.session, w.pub, w.topic, w.client_id
        loop = asyncio.get_running_loop()
        until = loop.time() + JOB_CLEAR_CONFIRM_S * 2
        while loop.time() < until:
            await pub.publish(topic, b"", qos=1, retain=False)  # clears nothing
            await asyncio.sleep(0.05)
            assert "4104" in session.state.jobs, job_lines(session)
        await eventually(lambda: not session.state.jobs_clearing, JOB_CLEAR_CONFIRM_S + 10,
                         message="the last empty message answered")
        assert "4104" in session.state.jobs
        assert not [ln for ln in job_lines(session) if "withdrawn (" in ln]
        # Once a minute at most (JOB_KEPT_SAID_S): each tick's answer was a line of its own.
        assert job_lines(session).count(KEPT) == 1, len(job_lines(session))
        assert session.feed is not None
        await eventually(lambda: topic not in session.feed.link.filters, 10,
                         message="the job's own topic let go")
        assert unsubscribed(broker, client_id, topic)
