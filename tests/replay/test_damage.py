"""Damaged recordings and files that are no recordings: `fleetdeck replay` skips and counts the
damage, replays the good lines, never hangs and never fails silently (docs/recording.md)."""

import gzip
import json
import os
from pathlib import Path

import pytest

from fleetdeck.console.recording import MAX_JUMP_S, RecordingReader
from fleetdeck.protocol import codec
from fleetdeck.protocol.topics import Kind
from tests.conftest import run_cli
from tests.helpers import FakeNode

T0 = 1_800_000_000.0
REPO_FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
CLI_TIMEOUT = 30  # a hang fails the test instead of the suite


def header(started: object = T0) -> str:
    # Written by hand (not json.dumps): the damage includes what JSON cannot say, like Infinity.
    return ('{"fleetdeck_recording": 1, "cluster": "dmg", "started": ' + str(started)
            + ', "fleetdeck": "0.1.0", "source": "test"}')


def message(t: object, topic: str, payload: bytes, retain: bool = False) -> str:
    return (f'{{"t": {t}, "topic": {json.dumps(topic)}, "qos": 1, '
            f'"retain": {json.dumps(retain)}, "p": {json.dumps(payload.decode())}}}')


def good_lines() -> list[str]:
    """One node: birth and status at T0, telemetry seq 1-3 at T0+1..3."""
    node = FakeNode("gpu0001", cluster="dmg", t0=T0)
    lines = [message(T0, node.topic(Kind.BIRTH), codec.encode(node.birth()), True),
             message(T0, node.topic(Kind.STATUS), codec.encode(node.status()), True)]
    for s in (1, 2, 3):
        lines.append(message(T0 + s, node.topic(Kind.TELEMETRY),
                             codec.encode(node.telemetry())))
    return lines


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def replay(path: Path, *extra: str):
    res = run_cli("replay", str(path), "--headless", "--summary-json", *extra,
                  timeout=CLI_TIMEOUT)
    assert "Traceback" not in res.stderr
    return res


def assert_good_lines_replayed(res) -> dict:
    out = json.loads(res.stdout)
    assert [(n["id"], n["seq"]) for n in out["nodes"]] == [("gpu0001", 3)]
    assert out["replay"]["start"] == T0 and out["replay"]["end"] == T0 + 3
    return out


def damage_cases() -> dict[str, tuple[list[str], str]]:
    lines = good_lines()
    last = lines[-1]
    return {
        # Each used to hang (replay ticking 0.5 s at a time towards infinity or 56 years) ...
        "infinite time, last line": (
            [header(), *lines, last.replace(f'"t": {T0 + 3}', '"t": Infinity')],
            "line 7: time inf is not a finite, non-negative number"),
        "time jumps 10^9 s": (
            [header(), *lines, last.replace(f'"t": {T0 + 3}', f'"t": {T0 + 1e9}')],
            "line 7: time jumps 999999997 s ahead"),
        "header started 0": (
            [header(0), *lines], "header 'started' '0' is not within 7 days"),
        # ... or raised RecursionError with a traceback.
        "deeply nested line": (
            [header(), *lines[:3], "[" * 100_000 + "]" * 100_000, *lines[3:]],
            "line 5: nested too deep to read"),
        # Said in words, not as Python's exception ("JSONDecodeError: Invalid control …").
        "garbled line": (
            [header(), *lines[:3], '{"t": 1.0, "topic": "a\x01b"}', *lines[3:]],
            "line 5: not valid JSON (invalid control character at column 23)"),
    }


@pytest.mark.parametrize("case", list(damage_cases()))
def test_damaged_lines_are_skipped_counted_and_the_rest_replays(tmp_path, case):
    lines, reason = damage_cases()[case]
    res = replay(write(tmp_path / "d.jsonl", lines))
    assert res.returncode == 1, res.stderr
    said = res.stderr.strip().splitlines()
    assert len(said) == 1, said
    assert said[0].startswith("fleetdeck replay: skipped 1 damaged part(s) of the recording "
                              "and replayed the rest; first: ")
    assert reason in said[0]
    out = assert_good_lines_replayed(res)
    assert out["replay"]["skipped_lines"] == 1 and len(out["replay"]["problems"]) == 1


@pytest.mark.parametrize("name", ["d.jsonl", "d.jsonl.gz"])
def test_a_corrupt_index_is_ignored_with_a_warning(tmp_path, name):
    """It pointed the end-of-replay scan at the last byte: nothing replayed, exit 0, silence."""
    path = tmp_path / name
    data = ("\n".join([header(), *good_lines()]) + "\n").encode()
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    (tmp_path / (name + ".idx")).write_text(
        json.dumps({"t": T0, "offset": path.stat().st_size - 1}) + "\n")
    res = replay(path)
    assert res.returncode == 1, res.stderr
    assert "damaged index" in res.stderr and "read the recording from the start" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert_good_lines_replayed(res)


def test_an_index_of_garbage_is_ignored_too(tmp_path):
    path = write(tmp_path / "d.jsonl", [header(), *good_lines()])
    (tmp_path / "d.jsonl.idx").write_bytes(b"\x00\xff not an index\n")
    reader = RecordingReader(path)
    assert reader.segments == [] and reader.report.skipped == 1
    assert len(list(reader.messages())) == 5


def test_a_recording_without_damage_says_nothing(tmp_path):
    res = replay(write(tmp_path / "d.jsonl", [header(), *good_lines()]))
    assert res.returncode == 0 and res.stderr == ""
    assert_good_lines_replayed(res)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"t": NaN, "topic": "fleetdeck/v1/dmg/x", "p": ""}', "not a finite"),
        ('{"t": -1, "topic": "fleetdeck/v1/dmg/x", "p": ""}', "not a finite"),
        ('{"t": true, "topic": "fleetdeck/v1/dmg/x", "p": ""}', "is not a number"),
        ('{"t": "1800000002", "topic": "fleetdeck/v1/dmg/x", "p": ""}', "is not a number"),
        ('{"t": 1e999999, "topic": "fleetdeck/v1/dmg/x", "p": ""}', "not a finite"),
        ('{"t": 99999999999999999999999999999999999999999999999999999999999999999999999999'
         '999999999999999999999999999999999999999999999999999999999999999999999999999999999999'
         '999999999999999999999999999999999999999999999999999999999999999999999999999999999999'
         '999999999999999999999999999999999999999999999999999999999999999999999999999999999999'
         '9999, "topic": "x", "p": ""}', "int too large to convert to float"),
        (f'{{"t": {T0 - MAX_JUMP_S - 10}, "topic": "fleetdeck/v1/dmg/x", "p": ""}}', "back"),
        (f'{{"t": {T0 + 2}, "topic": "fleetdeck/v1/dmg/#", "p": ""}}', "not an MQTT topic"),
        (f'{{"t": {T0 + 2}, "topic": "fleetdeck/v1/dmg/x", "qos": 7, "p": ""}}', "qos 7"),
        (f'{{"t": {T0 + 2}, "topic": "fleetdeck/v1/dmg/x", "retain": "y", "p": ""}}', "retain"),
        (f'{{"t": {T0 + 2}, "topic": "fleetdeck/v1/dmg/x", "p": 5}}', "not text"),
        (f'{{"t": {T0 + 2}, "topic": "fleetdeck/v1/dmg/x"}}', "no payload"),
        (f'{{"t": {T0 + 2}, "keyframe": {{"a": 1}}}}', "keyframe is not a list"),
        (f'{{"t": {T0 + 2}, "keyframe": [["fleetdeck/v1/dmg/x", {{"p": "a"}}], 3]}}',
         "keyframe entry"),
        (f'{{"t": {T0 + 2}, "gap": {{"from": {T0 + 5}}}}}', "gap start is after its end"),
        ('"fleetdeck_recording"', "not a JSON object"),
        ("[1, 2]", "not a JSON object"),
    ],
    ids=["nan", "negative", "bool", "string", "inf-literal", "huge-int", "far-back", "wildcard",
         "qos", "retain", "payload-type", "no-payload", "keyframe-dict", "keyframe-entry", "gap",
         "string-line", "list-line"],
)
def test_the_reader_refuses_what_it_must_not_pass_on(tmp_path, line, reason):
    lines = good_lines()
    path = write(tmp_path / "d.jsonl", [header(), *lines[:3], line, *lines[3:]])
    reader = RecordingReader(path)
    msgs = list(reader.messages())
    assert reader.report.skipped == 1, reader.report.problems
    assert reason in reader.report.problems[0]
    assert len(msgs) == 5 and all(T0 <= m.t <= T0 + 3 for m in msgs)


def test_a_small_step_back_in_time_replays_in_order(tmp_path):
    lines = good_lines()
    lines[3] = lines[3].replace(f'"t": {T0 + 2}', f'"t": {T0 + 0.5}')  # clock stepped back 1.5 s
    reader = RecordingReader(write(tmp_path / "d.jsonl", [header(), *lines]))
    times = [m.t for m in reader.messages()]
    assert times == sorted(times) and len(times) == 5 and reader.report.skipped == 0


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda p: p.mkdir(), "is a directory, not a recording"),
        (lambda p: None, "does not exist"),
        (lambda p: p.write_text("hello, not a recording\n"), "is not a fleetdeck recording"),
        (lambda p: p.write_bytes(os.urandom(4096)), "is not a fleetdeck recording"),
        (lambda p: p.write_bytes(gzip.compress(b"\x00" * 4096)), "is not a fleetdeck recording"),
        (lambda p: p.write_text("[" * 100_000 + "]" * 100_000 + "\n"),
         "is not a fleetdeck recording"),
        (lambda p: p.write_text('{"fleetdeck_recording": 1, "cluster": "a/#", "started": 1}\n'),
         "is not a cluster name"),
        (lambda p: p.write_bytes(b""), "is empty: it holds no recording"),
        (lambda p: p.write_bytes(gzip.compress(b"")), "is empty: it holds no recording"),
    ],
    ids=["directory", "missing", "text", "binary", "gzip-of-zeros", "nested", "bad-cluster",
         "empty", "gzip-of-nothing"],
)
def test_what_is_no_recording_is_one_sentence(tmp_path, make, needle):
    path = tmp_path / "thing"
    make(path)
    res = replay(path)
    assert res.returncode == 2
    assert res.stdout == ""
    said = res.stderr.strip().splitlines()
    assert len(said) == 1 and said[0].startswith("fleetdeck replay: ") and needle in said[0]


def test_a_directory_is_one_sentence_in_the_console_and_to_a_broker_too(tmp_path):
    for extra in ([], ["--to-broker", "mqtt://127.0.0.1:1"]):
        res = run_cli("replay", str(tmp_path), *extra, timeout=CLI_TIMEOUT)
        assert res.returncode == 2 and "Traceback" not in res.stderr
        assert "is a directory, not a recording" in res.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_an_unreadable_file_is_one_sentence(tmp_path):
    path = write(tmp_path / "d.jsonl", [header(), *good_lines()])
    path.chmod(0)
    res = replay(path)
    assert res.returncode == 2 and "permission denied" in res.stderr


def test_to_broker_skips_the_damage_instead_of_sleeping_forever(mosquitto, tmp_path):
    """An infinite time made --to-broker wait for it (asyncio.sleep(inf))."""
    lines, _ = damage_cases()["infinite time, last line"]
    res = run_cli("replay", str(write(tmp_path / "d.jsonl", lines)), "--to-broker",
                  str(mosquitto.url), "--speed", "100", timeout=CLI_TIMEOUT)
    assert res.returncode == 1, res.stderr
    assert "Traceback" not in res.stderr
    said = res.stderr.strip().splitlines()
    assert said[0].startswith(f"replayed 5 messages into {mosquitto.url} as cluster ")
    assert said[-1].startswith("fleetdeck replay: skipped 1 damaged part(s)")


def test_bytes_changed_inside_a_gzip_are_corruption_not_truncation(tmp_path):
    """200 bytes flipped in the middle of a .gz read "compressed data ends early … (truncated
    recording)" (a newcomer's run): the file is corrupt, not cut short."""
    lines = [header()]
    node = FakeNode("gpu0001", cluster="dmg", t0=T0)
    lines += [message(T0, node.topic(Kind.BIRTH), codec.encode(node.birth()), True)]
    for s in range(1, 400):
        lines.append(message(T0 + s, node.topic(Kind.TELEMETRY),
                             codec.encode(node.telemetry())))
    raw = bytearray(gzip.compress(("\n".join(lines) + "\n").encode()))
    mid = len(raw) // 2
    raw[mid:mid + 200] = bytes(b ^ 0xFF for b in raw[mid:mid + 200])
    path = tmp_path / "c.jsonl.gz"
    path.write_bytes(bytes(raw))
    reader = RecordingReader(path)
    for _ in reader.messages():
        pass
    assert reader.report.skipped >= 1 and not reader.report.truncated, reader.report
    assert any("compressed data is corrupt" in p for p in reader.report.problems), \
        reader.report.problems
    # One member: no intact one after the damage to read on from.
    assert reader.report.unreadable_rest and reader.report.spans == []


def members(data: bytes) -> list[int]:
    """Where each gzip member of ``data`` starts."""
    import zlib

    starts, pos = [], 0
    while pos < len(data):
        starts.append(pos)
        inflate = zlib.decompressobj(31)
        inflate.decompress(data[pos:])
        pos = len(data) - len(inflate.unused_data)
    return starts


def damaged_in_the_middle(tmp_path: Path) -> tuple[Path, float, float]:
    """Two nodes, 60 s, a segment every 10 s and a member every 2 s; gpu0002 is born at 31 s.
    The member that holds 31 s has bytes changed: (path, the last time before it, the first
    time after it)."""
    from fleetdeck.console.recording import RecordingWriter

    path = tmp_path / "m.jsonl.gz"
    writer = RecordingWriter(path, "dmg", started=T0, segment_s=10)
    # gpu0002's clock reads the time it is born at (30 s behind, it read T1: console/clock.py).
    a, b = FakeNode("gpu0001", cluster="dmg", t0=T0), FakeNode("gpu0002", cluster="dmg",
                                                               t0=T0 + 30)
    writer.write(T0, a.topic(Kind.BIRTH), codec.encode(a.birth()), 1, True)
    for s in range(1, 61):
        if s == 31:
            writer.write(T0 + s, b.topic(Kind.BIRTH), codec.encode(b.birth()), 1, True)
        for node in (a, b) if s >= 31 else (a,):
            writer.write(T0 + s, node.topic(Kind.TELEMETRY), codec.encode(node.telemetry()))
        if s % 2 == 0:
            writer.flush()
    writer.close()
    raw = bytearray(path.read_bytes())
    with gzip.open(path) as f:
        times = [json.loads(line)["t"] for line in f.read().splitlines()[1:]]
    starts = members(bytes(raw))
    # The member holding 31 s (written between the flushes at 30 s and 32 s).
    at = next(i for i, start in enumerate(starts) if start > 0 and any(
        t == T0 + 31 for t in _times_of(bytes(raw[start:]))))
    mid = (starts[at] + starts[at + 1]) // 2
    raw[mid:mid + 16] = bytes(x ^ 0x5A for x in raw[mid:mid + 16])
    path.write_bytes(bytes(raw))
    assert T0 + 60 in times
    return path, T0 + 30, T0 + 33


def _times_of(member: bytes) -> list[float]:
    import zlib

    text = zlib.decompressobj(31).decompress(member)
    return [json.loads(line)["t"] for line in text.splitlines() if line.startswith(b'{"t"')]


def test_a_damaged_gzip_member_is_skipped_and_the_members_after_it_replay(tmp_path):
    """64 bytes changed in the middle of a recording of ~150 members replayed only what came
    before them, rc=1 "nothing after it could be read" (an SRE's run): each member is whole
    lines, so reading goes on at the next intact one, the stretch lost is a span the replay is
    blind in, and the next keyframe puts back what the lost part held (gpu0002's birth)."""
    path, since, until = damaged_in_the_middle(tmp_path)
    res = replay(path)
    assert res.returncode == 1, res.stderr
    said = res.stderr.strip().splitlines()
    assert len(said) == 1, said
    assert said[0].startswith("fleetdeck replay: skipped 1 damaged part(s) of the recording "
                              "and replayed the rest; first: "), said
    assert "compressed data is corrupt" in said[0]
    assert "3.0 s lost, from 30.0 s to 33.0 s into the recording" in said[0]
    out = json.loads(res.stdout)
    assert out["replay"]["end"] == T0 + 60 and not out["replay"]["unreadable_rest"]
    assert [(n["id"], n["seq"]) for n in out["nodes"]] == [("gpu0001", 60), ("gpu0002", 30)]
    reader = RecordingReader(path)
    for _ in reader.messages():
        pass
    assert reader.report.spans == [(since, until, "a damaged part of the recording could "
                                    "not be read")]
    assert reader.report.gaps == 0  # no recorder lost its broker: not said as a gap


def test_the_replay_console_reads_past_a_damaged_member_too(tmp_path):
    from fleetdeck.console.replay import Player

    path, since, until = damaged_in_the_middle(tmp_path)
    player = Player(path, snapshot_every=4)
    assert player.end == T0 + 60 and player.gaps[0][:2] == (since, until)
    player.seek(T0 + 45)
    assert {n: s.last_seq for n, s in player.state.nodes.items()} == {"gpu0001": 45,
                                                                  "gpu0002": 15}
    player.seek(T0 + 20)  # back, from a snapshot, and on again over the damage
    player.seek(T0 + 60)
    assert {n: s.last_seq for n, s in player.state.nodes.items()} == {"gpu0001": 60,
                                                                  "gpu0002": 30}



def test_a_recording_of_another_clusters_nodes_is_one_sentence_and_exit_3(tmp_path):
    """A header naming cluster 'pm' over topics of cluster 'fx' replayed as an empty fleet,
    exit 0, not a word (an SRE's run); ``record`` of a cluster it heard nothing of exits 3
    "nothing to replay", and so does the replay, headless and the console alike (before the
    screen opens)."""
    path = tmp_path / "mismatch.jsonl.gz"
    with gzip.open(REPO_FIXTURES / "xid79.jsonl.gz", "rb") as f:
        first, rest = f.read().split(b"\n", 1)
    path.write_bytes(gzip.compress(first.replace(b'"cluster":"fx"', b'"cluster":"pm"')
                                   + b"\n" + rest))
    said = ("fleetdeck replay: no node of cluster 'pm' in this recording (its topics are of "
            "cluster 'fx'): nothing to replay.")
    # --to-broker too, before it connects: it published cluster 'fx''s topics unrenamed,
    # past the check for a cluster the broker holds (made for 'pm'), and said "replayed 627
    # messages as cluster 'pm'" (nothing listens on this port: a connect would be refused).
    for extra in (("--headless",), ("--headless", "--summary-json"), (),
                  ("--to-broker", "mqtt://127.0.0.1:49599")):
        res = run_cli("replay", str(path), *extra, timeout=CLI_TIMEOUT)
        assert (res.returncode, res.stderr.strip(), res.stdout) == (3, said, ""), extra


def test_a_recording_with_no_node_at_all_says_so(tmp_path):
    from fleetdeck.console.replay import NothingToReplay, Player

    path = write(tmp_path / "empty.jsonl", [header()])
    res = replay(path)
    assert res.returncode == 3
    assert "no node of cluster 'dmg' in this recording (it holds no message of any node)" \
        in res.stderr
    with pytest.raises(NothingToReplay):
        Player(path)
