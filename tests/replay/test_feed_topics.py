"""Which recorded topics a headless replay hands to Ingest: a live console's subscriptions
decide (``TickFeed._console_hears``). Topics of one shape (a node's birth as another node's)
are matched once, and each answer is what matching the topic itself against the filters says."""

from pathlib import Path

import aiomqtt

from fleetdeck.console.recording import RecordingReader, RecordingWriter
from fleetdeck.console.replay import TickFeed

T0 = 1_800_000_000.0
ROOT = "fleetdeck/v1"
TOPICS = [
    *(f"{ROOT}/c1/node/gpu{i:04d}/{kind}" for i in range(1, 4)
      for kind in ("birth", "status", "telemetry", "event", "ack", "cmd", "inject", "x")),
    # Node ids that are words the filters name elsewhere, empty levels, extra levels.
    f"{ROOT}/c1/node/status/birth", f"{ROOT}/c1/node/ack/ack", f"{ROOT}/c1/node/sched/cmd",
    f"{ROOT}/c1/node//birth", f"{ROOT}/c1/node/gpu1/birth/x", f"{ROOT}/c1/node/gpu1",
    f"{ROOT}/c1/node", f"{ROOT}/c1/job/j1/status", f"{ROOT}/c1/job/j1/status/x",
    f"{ROOT}/c1/job//status", f"{ROOT}/c1/sched/status", f"{ROOT}/c1/sched/ack",
    f"{ROOT}/c1/sched/cmd", f"{ROOT}/c1/sched/other", f"{ROOT}/c1/collector/col1",
    f"{ROOT}/c1/collector/col1/x", f"{ROOT}/c1/digest/gpu0001", f"{ROOT}/c1/digest/",
    f"{ROOT}/c1/sim/inject", f"{ROOT}/c2/node/gpu0001/birth", f"{ROOT}/c2/sched/status",
    "fleetdeck/v2/c1/node/gpu0001/birth", "other/v1/c1/node/gpu0001/birth", "a", "/",
    f"{ROOT}/c1", f"{ROOT}/c1/", "fleetdeck", "$SYS/broker/uptime",
]


def feed(tmp_path: Path) -> TickFeed:
    path = tmp_path / "rec.jsonl"
    if not path.exists():
        RecordingWriter(path, "c1", source="test", started=T0).close()
    return TickFeed(RecordingReader(path), "c1")


def test_each_topic_is_heard_as_its_own_match_against_the_filters_says(tmp_path: Path) -> None:
    one = feed(tmp_path)  # every topic through one feed: shapes seen before answer
    heard = []
    for topic in TOPICS:
        expected = any(aiomqtt.Topic(topic).matches(f) for f in one._filters)
        assert one._console_hears(topic) is expected, topic
        assert feed(tmp_path)._console_hears(topic) is expected, topic  # a shape seen first
        heard.append(expected)
    assert any(heard) and not all(heard)


def test_topics_of_one_shape_are_matched_once(tmp_path: Path) -> None:
    f = feed(tmp_path)
    for i in range(1, 1025):
        assert f._console_hears(f"{ROOT}/c1/node/gpu{i:04d}/birth")
        assert f._console_hears(f"{ROOT}/c1/node/gpu{i:04d}/status")
    assert not f._console_hears(f"{ROOT}/c1/node/gpu0001/inject")
    assert len(f._shapes) == 3
