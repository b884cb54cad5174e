"""`fleetdeck record` never destroys a recording it was not told to: nothing is created or
truncated before the broker answers, and an existing --out needs --force."""

from pathlib import Path

import pytest

from fleetdeck.console.recording import RecordingReader, RecordingWriter
from tests.conftest import run_cli

NOBODY = "mqtt://127.0.0.1:1"
"""Port 1 on loopback: the connection is refused at once."""


def _old_recording(path: Path) -> bytes:
    w = RecordingWriter(path, "old", source="test", started=1.0)
    w.write(2.0, "fleetdeck/v1/old/status/gpu0001", b'{"online":true}')
    w.close()
    return path.read_bytes()


def test_an_existing_recording_is_refused_without_force(tmp_path):
    out = tmp_path / "week.jsonl.gz"
    before = _old_recording(out)
    res = run_cli("record", "--broker", NOBODY, "--cluster", "old", "--out", str(out),
                  "--duration", "2")
    assert res.returncode == 2
    assert "already exists" in res.stderr and "--force" in res.stderr
    assert "Traceback" not in res.stderr
    assert out.read_bytes() == before


def test_a_failed_connect_leaves_an_existing_recording_whole_even_with_force(tmp_path):
    out = tmp_path / "week.jsonl.gz"
    before = _old_recording(out)
    idx = out.with_name(out.name + ".idx").read_bytes()
    res = run_cli("record", "--broker", NOBODY, "--cluster", "old", "--out", str(out),
                  "--duration", "2", "--force")
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    assert out.read_bytes() == before
    assert out.with_name(out.name + ".idx").read_bytes() == idx


def test_a_failed_connect_leaves_no_file_behind(tmp_path):
    out = tmp_path / "new.jsonl.gz"
    res = run_cli("record", "--broker", NOBODY, "--cluster", "c", "--out", str(out),
                  "--duration", "2")
    assert res.returncode == 2, res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_force_overwrites_once_connected(mosquitto, tmp_path):
    out = tmp_path / "again.jsonl"
    _old_recording(out)
    res = run_cli("record", "--broker", str(mosquitto.url), "--cluster", "fresh", "--out",
                  str(out), "--duration", "1", "--force")
    # Overwritten, though with nothing of a node in it: said, and exit 3 (a replay audit).
    assert res.returncode == 3, res.stderr
    assert "holds no message of a node of cluster 'fresh'" in res.stderr
    assert RecordingReader(out).header.cluster == "fresh"


async def test_a_recording_of_a_cluster_nobody_publishes_on_says_so_while_it_runs(
        mosquitto, tmp_path, monkeypatch):
    """`record --cluster prod` of a fleet named rr recorded its own rebirth request for the
    whole night and exited 0 (a replay audit): after 10 s with nothing from a node it says so,
    naming the clusters that have nodes there."""
    from fleetdeck.brokerurl import make_client
    from fleetdeck.console import replay
    from fleetdeck.protocol import codec
    from fleetdeck.protocol.topics import Kind, topic_for
    from tests.helpers import FakeNode

    node = FakeNode(cluster="rr")
    async with make_client(mosquitto.url, "test-birth") as c:
        await c.publish(topic_for("rr", Kind.BIRTH, "gpu0001"), codec.encode(node.birth()),
                        qos=1, retain=True)
    monkeypatch.setattr(replay, "NOTHING_HEARD_S", 0.5)
    said: list[str] = []
    stats = await replay.record(mosquitto.url, "prod", tmp_path / "p.jsonl", 2.5,
                                say=said.append)
    assert stats.node_messages == 0 and stats.clusters_seen == ["rr"]
    [warning] = [s for s in said if s.startswith("nothing from any node")]
    assert warning == (f"nothing from any node of cluster 'prod' in 0.5 s on {mosquitto.url} "
                       "(clusters with nodes there: rr; wrong --cluster?); recording on.")


def test_the_writer_refuses_an_existing_file_when_told_not_to_overwrite(tmp_path):
    out = tmp_path / "r.jsonl"
    before = _old_recording(out)
    with pytest.raises(FileExistsError):
        RecordingWriter(out, "x", started=0.0, overwrite=False)
    assert out.read_bytes() == before


def test_sim_out_refuses_an_existing_recording_without_force(tmp_path, capsys):
    from fleetdeck.cli import main

    out = tmp_path / "week.jsonl.gz"
    before = _old_recording(out)
    assert main(["sim", "--nodes", "2", "--out", str(out), "--duration", "1h"]) == 2
    err = capsys.readouterr().err
    assert "already exists" in err and "--force" in err
    assert out.read_bytes() == before
    assert main(["sim", "--nodes", "2", "--out", str(out), "--duration", "1h", "--force"]) == 0
    assert RecordingReader(out).header.cluster == "demo"


def test_the_consoles_own_recording_never_overwrites_one(tmp_path):
    """The TUI's R names its file by the second: started twice within one, the second goes
    beside the first instead of truncating it."""
    from fleetdeck.brokerurl import BrokerURL
    from fleetdeck.console.session import ConsoleSession

    session = ConsoleSession("rec", url=BrokerURL("127.0.0.1", 9), follow_up=False)
    path = tmp_path / "fleetdeck-rec-20261203T083239.jsonl.gz"
    first = session.start_recording(path)
    session.stop_recording()
    size = path.stat().st_size
    second = session.start_recording(path)
    session.stop_recording()
    assert first.path == path
    assert second.path == tmp_path / "fleetdeck-rec-20261203T083239-2.jsonl.gz"
    assert path.stat().st_size == size and second.path.exists()
