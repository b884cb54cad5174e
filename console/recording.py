"""Recordings: every message under a cluster's topic root, as received, replayable exactly.

Format v1 (docs/recording.md): JSON Lines, one object per line.

* line 1, the header: ``{"fleetdeck_recording": 1, "cluster": …, "started": unix s,
  "fleetdeck": version, "source": broker URL}``;
* a message: ``{"t": receive time (unix s), "topic": …, "qos": 0|1|2, "retain": bool,
  "p": payload as text}`` — or ``"b64"`` instead of ``"p"`` when the payload is not UTF-8, so bad
  payloads replay byte for byte;
* a keyframe, at the start of every segment (default every 60 s of recording):
  ``{"t": …, "keyframe": [[topic, payload], …]}`` with the latest birth, status, telemetry and
  job status seen so far: a reader that seeks into the file starts from the keyframe before the
  target instead of the beginning;
* a gap note, where the recorder had lost the broker: ``{"t": when it was back, "gap":
  {"from": when it was lost, "reason": …}}``; readers report it (``ReadReport.gaps``) so a
  quiet stretch is not mistaken for a quiet fleet.

``.gz`` files are multi-member gzip, one member per segment, so a segment can be decompressed on
its own. Either way a sidecar ``FILE.idx`` (JSON Lines ``{"t": …, "offset": …}``, one per segment)
makes seeking fast; without it (or if it is damaged) the reader scans from the start.
"""

import base64
import contextlib
import gzip
import json
import math
import re
import zlib
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import msgspec

from fleetdeck import __version__
from fleetdeck.errors import UserError
from fleetdeck.protocol.codec import printable_text
from fleetdeck.protocol.ids import is_valid_id
from fleetdeck.protocol.topics import Kind, TopicError, parse_topic

FORMAT_VERSION = 1
KEYFRAME_KINDS = frozenset({Kind.BIRTH, Kind.STATUS, Kind.TELEMETRY, Kind.JOB})

MAX_JUMP_S = 7 * 86400.0
"""The reader skips a line whose time is more than this after (or before) the last good line's:
one bad time must not make a replay tick through years of nothing (docs/recording.md)."""
MAX_LINE_BYTES = 256 << 20
"""Longer lines are skipped unread. A keyframe of 4,096 nodes is tens of MiB."""
MAX_HEADER_BYTES = 1 << 20
MAX_INDEX_BYTES = 64 << 20
MAX_NOTES = 20
"""Problems (and gap notes) kept as text; all of them are counted."""
GAP_NOTE = "gap: "
PROBE_LINES = 16
PROBE_TIMES = 8
"""The header's 'started' is judged against the times of up to PROBE_TIMES of the first
PROBE_LINES lines after it."""
KEYFRAME_PROBE_BYTES = 64
_KEYFRAME_HEAD = re.compile(rb'\{\s*"t"\s*:\s*([0-9][0-9.eE+-]*)\s*,\s*"keyframe"\s*:')
_MSG_HEAD = re.compile(
    rb'\{"t":([0-9]{1,12}(?:\.[0-9]{1,9})?),'
    rb'"topic":"([\x20\x21\x24-\x2a\x2c-\x5b\x5d-\x7e]{1,65535})",'
    rb'"qos":([012]),"retain":(true|false),"p":"')
"""The head of a message line exactly as RecordingWriter writes it; a line that does not match
(or does not end in ``"}``) goes through the full JSON parser instead. The topic class leaves
out what ``_check_topic`` refuses (wildcards, quotes, escapes, control and non-ASCII bytes)."""
READ_BYTES = 1 << 20
"""The reader takes the file in reads of this size and finds lines itself: a readline per
message cost more than parsing its head."""
_decode_str = msgspec.json.Decoder(str).decode


class _Damage(ValueError):
    """A line (or header field, or index) the reader refuses; the message says why, in words."""


class _Corrupt(Exception):
    """A gzip member whose compressed bytes are damaged. The next intact member starts at or
    after ``resync_from`` (a file offset): every member is a whole number of lines, so reading
    can go on there."""

    def __init__(self, cause: Exception, resync_from: int) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.resync_from = resync_from


GZIP_MAGIC = b"\x1f\x8b\x08"
"""How every gzip member the writer makes begins (magic and the deflate method)."""
RESYNC_PROBE_BYTES = 64 << 10
UNREADABLE_WHY = "a damaged part of the recording could not be read"


@dataclass(frozen=True, slots=True)
class Recorded:
    t: float
    topic: str
    payload: bytes
    qos: int = 0
    retain: bool = False
    keyframe: bool = False
    """True for messages restored from a keyframe (state, not something that happened at t)."""


def _where(lineno: int, offset: int) -> str:
    return f"line {lineno}" if offset == 0 else f"line {lineno} of the segment at byte {offset}"


class Scanned:
    """One message as the reader found it, its payload still encoded in ``raw`` (the line) from
    ``p_at`` on, or already known (``known``: keyframe entries and lines that needed the full
    parser). Ask :meth:`RecordingReader.payload` for the bytes."""

    __slots__ = (
        "keyframe",
        "known",
        "lineno",
        "offset",
        "p_at",
        "qos",
        "raw",
        "retain",
        "t",
        "topic",
    )

    def __init__(self, t: float, topic: str, qos: int, retain: bool, keyframe: bool,
                 raw: bytes | None, p_at: int, known: bytes | None, lineno: int,
                 offset: int) -> None:
        self.t = t
        self.topic = topic
        self.qos = qos
        self.retain = retain
        self.keyframe = keyframe
        self.raw = raw
        self.p_at = p_at
        self.known = known
        self.lineno = lineno
        self.offset = offset

    def where(self) -> str:
        return _where(self.lineno, self.offset)


def _encode_payload(payload: bytes) -> dict[str, str]:
    try:
        return {"p": payload.decode("utf-8")}
    except UnicodeDecodeError:
        return {"b64": base64.b64encode(payload).decode("ascii")}


def _decode_payload(obj: Any) -> bytes:
    if not isinstance(obj, dict):
        raise _Damage("payload is not an object")
    if "p" in obj:
        if not isinstance(obj["p"], str):
            raise _Damage("payload 'p' is not text")
        return obj["p"].encode("utf-8", errors="surrogateescape")
    if not isinstance(obj.get("b64"), str):
        raise _Damage("no payload ('p' or 'b64' text)")
    return base64.b64decode(obj["b64"], validate=True)


class RecordingWriter:
    """Append messages; start a new segment (keyframe + new gzip member) every ``segment_s``."""

    def __init__(self, path: Path, cluster: str, *, source: str = "", started: float,
                 segment_s: float = 60.0, overwrite: bool = True,
                 judged: Sequence["JudgedNode"] = ()) -> None:
        """``overwrite=False`` raises FileExistsError rather than truncate an existing file:
        the check and the creation are one system call, so no other writer slips in between.
        ``judged``: the nodes the recording console judged not ok as it started
        (``summary.judged_not_ok``), kept in the header as ``judged_at_start``."""
        self.path = path
        self.gzip = path.suffix == ".gz"
        self.segment_s = segment_s
        mode = "wb" if overwrite else "xb"
        self._raw: IO[bytes] = open(path, mode)  # noqa: SIM115  (closed in close())
        self._index: IO[str] = open(self._index_path(path), "w")  # noqa: SIM115
        self._z: Any = None
        self._segment_start: float | None = None
        self._latest: dict[str, bytes] = {}
        self.messages = 0
        self.gaps = 0
        self.bytes_in = 0
        self.closed_size = 0
        header: dict[str, object] = {
            "fleetdeck_recording": FORMAT_VERSION, "cluster": cluster, "started": started,
            "fleetdeck": __version__, "source": source, "segment_s": segment_s}
        if judged:
            header["judged_at_start"] = _bounded(judged)
        self._start_member()
        self._write_line(header)
        # The header is a gzip member of its own, so every segment starts on a member boundary
        # and can be decompressed from its index offset.
        self._end_member()
        self._start_member()

    @staticmethod
    def _index_path(path: Path) -> Path:
        return path.with_name(path.name + ".idx")

    @property
    def size(self) -> int:
        return self._raw.tell()

    def _start_member(self) -> None:
        if self.gzip:
            self._z = zlib.compressobj(6, zlib.DEFLATED, 31)

    def _end_member(self) -> None:
        if self.gzip and self._z is not None:
            self._raw.write(self._z.flush())
            self._z = None

    def _write_line(self, obj: dict[str, Any]) -> None:
        data = (json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
        self._raw.write(self._z.compress(data) if self.gzip else data)

    def seed(self, topic: str, payload: bytes) -> None:
        """State known before the recording started (a console's retained picture): it goes
        into the first keyframe, so the recording replays to a complete picture."""
        self._latest[topic] = payload

    def write(self, t: float, topic: str, payload: bytes, qos: int = 0,
              retain: bool = False) -> None:
        if self._segment_start is None or t - self._segment_start >= self.segment_s:
            self._new_segment(t)
        self._write_line({"t": round(t, 6), "topic": topic, "qos": qos, "retain": retain,
                          **_encode_payload(payload)})
        self.messages += 1
        self.bytes_in += len(payload)
        with contextlib.suppress(TopicError):
            if parse_topic(topic).kind in KEYFRAME_KINDS:
                self._latest[topic] = payload

    def gap(self, since: float, until: float, reason: str) -> None:
        """Mark a stretch with no data because the recorder was cut off from the broker."""
        if self._segment_start is None:
            self._new_segment(until)
        self._write_line({"t": round(until, 6),
                          "gap": {"from": round(min(since, until), 6), "reason": reason}})
        self.gaps += 1

    def _new_segment(self, t: float) -> None:
        if self._segment_start is not None:
            self._end_member()
            self._raw.flush()
            self._start_member()
        self._segment_start = t
        self._index.write(json.dumps({"t": t, "offset": self._raw.tell()}) + "\n")
        self._index.flush()
        frame = [[topic, _encode_payload(p)] for topic, p in self._latest.items()]
        self._write_line({"t": round(t, 6), "keyframe": frame})

    def flush(self) -> None:
        """Make what was written so far readable (ends the current gzip member)."""
        if self.gzip:
            self._end_member()
            self._start_member()
        self._raw.flush()

    def close(self) -> None:
        self._end_member()
        self.closed_size = self._raw.tell()
        self._raw.close()
        self._index.close()


@dataclass
class ReadReport:
    """What a reader skipped or noticed. ``skipped`` counts damage (a line, a header field or
    an index it could not use); gaps where the recorder had lost the broker are no damage and
    are counted apart, though their notes share ``problems`` (see :func:`is_gap_note`)."""

    lines: int = 0
    skipped: int = 0
    problems: list[str] = field(default_factory=list)
    truncated: bool = False
    unreadable_rest: bool = False
    """The file's compressed data is corrupt and no intact gzip member follows the damage:
    nothing after it could be read. A damaged member with intact ones after it is skipped
    instead (a span in ``spans``, a problem)."""
    gaps: int = 0
    spans: list[tuple[float, float, str]] = field(default_factory=list)
    """Each gap as (from, until, why), recorded time, in the file's order: a replay is as
    blind there as the recorder was (``ConsoleSession.replay_gaps``)."""

    def problem(self, text: str) -> None:
        self.skipped += 1
        if self.skipped <= MAX_NOTES:
            self.problems.append(text)

    def gap(self, text: str, since: float, until: float, why: str) -> None:
        self.gaps += 1
        if all(span[:2] != (since, until) for span in self.spans):  # a second read's
            self.spans.append((since, until, why))
        if self.gaps <= MAX_NOTES:
            self.problems.append(GAP_NOTE + text)

    def unreadable(self, since: float, until: float) -> None:
        """A stretch lost to a damaged gzip member: a span the replay is blind in, as in a gap,
        but said as damage (its problem), not as a recorder that lost the broker."""
        if all(span[:2] != (since, until) for span in self.spans):
            self.spans.append((since, until, UNREADABLE_WHY))


def line_fault(err: Exception) -> str:
    """What is wrong with a line, in words: "JSONDecodeError: Invalid control character at:
    line 1 column 58 (char 57)" named Python's exception (a newcomer's run)."""
    if isinstance(err, json.JSONDecodeError):
        what = err.msg.lower().removesuffix(" at")  # "Invalid control character at"
        return f"not valid JSON ({what} at column {err.colno})"
    if isinstance(err, RecursionError):
        return "nested too deep to read"
    if isinstance(err, KeyError):
        return f"a field is missing ({err})"[:100]
    return f"not a line it can read ({str(err)[:80]})"


def damage_text(report: ReadReport) -> str:
    """'' when the reader skipped nothing, else one sentence saying what it skipped, naming the
    first problem (docs/recording.md: damage is tolerated, never silently)."""
    if not report.skipped:
        return ""
    damage = [p for p in report.problems if not is_gap_note(p)]
    first = f"; first: {damage[0]}" if damage else ""
    cut = " (it is truncated)" if report.truncated else ""
    rest = ("replayed what came before the corrupt part; nothing after it could be read"
            if report.unreadable_rest else "replayed the rest")
    return f"skipped {report.skipped} damaged part(s) of the recording{cut} and {rest}{first}."


def is_gap_note(text: str) -> bool:
    """True for a note about a gap in a recording (not damage) among ``ReadReport.problems``."""
    return text.startswith(GAP_NOTE)


@dataclass
class Header:
    cluster: str
    started: float
    version: str
    source: str
    judged_at_start: tuple["JudgedNode", ...] = ()
    """What the recording console judged not ok as it started (older recordings: none)."""


@dataclass(frozen=True)
class JudgedNode:
    """A node the recording console judged not ok when the recording started: what rests on
    the hour before it (N2, N3, N5, a recovered switch) a replay cannot rebuild."""

    node: str
    verdict: str
    findings: tuple[str, ...]

    @property
    def text(self) -> str:
        first = f": {self.findings[0]}" if self.findings else ""
        more = f" (+{len(self.findings) - 1} more)" if len(self.findings) > 1 else ""
        return f"{self.node} {self.verdict}{first}{more}"

    def as_json(self) -> dict[str, object]:
        return {"node": self.node, "verdict": self.verdict, "findings": list(self.findings)}


def judged_note(nodes: int) -> str:
    """What a replay says of a recording whose console judged ``nodes`` nodes not ok as it
    started (the replay console, ``replay --headless``)."""
    return (f"when this recording started, its console judged {nodes} node(s) not ok; the "
            "replay judges only what the recording holds, so findings over the hour before it "
            "(N4's episodes, a recovered switch; N2/N3 from agents older than errors_1h) may "
            "be missing here (replay --headless "
            "--summary-json: replay.judged_at_start has them)")


JUDGED_BYTES = 256 * 1024
"""The most ``judged_at_start`` may take of the header, well within what a reader reads of
it (MAX_HEADER_BYTES): nodes past it are left out, worst first kept."""
FINDING_CHARS = 300


def _bounded(judged: Sequence[JudgedNode]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    size = 0
    for j in judged:
        entry = JudgedNode(j.node, j.verdict,
                           tuple(f[:FINDING_CHARS] for f in j.findings[:20])).as_json()
        size += len(json.dumps(entry))
        if size > JUDGED_BYTES:
            break
        out.append(entry)
    return out


def _judged(raw: object) -> tuple[JudgedNode, ...] | None:
    """The header's ``judged_at_start``, checked; None when it is damaged."""
    if not isinstance(raw, list) or len(raw) > 10_000:
        return None
    out = []
    for item in raw:
        if not isinstance(item, dict):
            return None
        node, verdict, findings = item.get("node"), item.get("verdict"), item.get("findings")
        if (not isinstance(node, str) or not is_valid_id(node) or not isinstance(verdict, str)
                or len(verdict) > 16 or not isinstance(findings, list)
                or not all(isinstance(f, str) and len(f) <= 1000 for f in findings)):
            return None
        # Read from a file: shown in notices and tables only as printable text.
        out.append(JudgedNode(node, printable_text(verdict),
                              tuple(printable_text(f) for f in findings[:20])))
    return tuple(out)


def _number(value: Any, what: str) -> float:
    # bool is an int to Python but never a time in a recording.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Damage(f"{what} {str(value)[:30]!r} is not a number")
    t = float(value)  # OverflowError for an int beyond float's range: damage too
    if not math.isfinite(t) or t < 0:
        raise _Damage(f"{what} {value} is not a finite, non-negative number")
    return t


def _check_time(value: Any, last: float) -> float:
    """A line's time, checked against the last good line's: never non-finite or negative,
    never more than MAX_JUMP_S away. A small step back (a clock adjusted under the recorder)
    replays at the previous time, so replay time never runs backwards."""
    t = _number(value, "time")
    if t > last + MAX_JUMP_S:
        raise _Damage(f"time jumps {t - last:.0f} s ahead of the line before (more than "
                      f"{MAX_JUMP_S / 86400:.0f} days)")
    if t < last - MAX_JUMP_S:
        raise _Damage(f"time jumps {last - t:.0f} s back from the line before (more than "
                      f"{MAX_JUMP_S / 86400:.0f} days)")
    return max(t, last)


def _check_topic(value: Any) -> str:
    # Received topics never hold wildcards or NUL; a publish with one (--to-broker) would fail.
    if (not isinstance(value, str) or not value or len(value) > 65535
            or any(c in value for c in "+#\0")):
        raise _Damage(f"topic {str(value)[:40]!r} is not an MQTT topic name")
    return value


def _check_qos(value: Any) -> int:
    if isinstance(value, bool) or value not in (0, 1, 2):
        raise _Damage(f"qos {str(value)[:10]} is not 0, 1 or 2")
    return int(value)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


# What one line of a recording can be, once checked.
_Line = tuple[str, float, Any]


@dataclass(frozen=True, slots=True)
class ReadMark:
    """Where a scan stood between two reads of the file: what reading on from there needs, so
    that a replay which put back a snapshot of that instant reads on from it, not from the start
    of its segment (``RecordingReader.scan_from``)."""

    offset: int
    """Of the file's next read."""
    inflate: Any
    """A copy of the gzip decompressor there (``zlib.decompressobj``); None between members and
    for a plain file."""
    unused: bytes
    """Compressed bytes read but not inflated yet (the next member's start)."""
    tail: bytes
    """Text inflated but not split into lines yet (the start of a line)."""
    lineno: int
    last: float
    use_keyframe: bool
    overlong: bool
    base: int
    """The offset the scan began at (what a message's ``where`` names)."""


class ReadCursor:
    """Handed to a scan, it holds the scan's latest ``ReadMark`` (taken at each read of the
    file): every line before it was yielded already."""

    __slots__ = ("_chunks", "mark")

    def __init__(self) -> None:
        self.mark: ReadMark | None = None
        self._chunks: tuple[int, Any, bytes] = (0, None, b"")
        """The decompression's state after what it handed out last: (offset, decompressor
        copy, unused)."""


class RecordingReader:
    """Reads a recording; tolerates truncation and bad lines, counting what it skipped.

    What it accepts is in docs/recording.md ("What the reader accepts"): everything it yields
    has a finite time, within MAX_JUMP_S of the good line before it and never earlier, so the
    Player above it never sees an endless or backwards clock.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.report = ReadReport()
        self.gzip = self._check_file(path)
        self.size = path.stat().st_size
        self.bytes_read = 0
        """How far into the file the last read reached (what progress is measured in)."""
        self.header = self._read_header()
        self.segments = self._load_index()

    def _check_file(self, path: Path) -> bool:
        """Whether it is gzip; before that, one sentence for anything that is not a file we
        can read (a directory, a device, no permission)."""
        try:
            if not path.exists():
                raise UserError(f"recording {path} does not exist.")
            if path.is_dir():
                raise UserError(f"{path} is a directory, not a recording (give the recording "
                                "file itself, e.g. incident.jsonl.gz).")
            if not path.is_file():
                raise UserError(f"{path} is not a regular file, so not a recording.")
            return _is_gzip(path)
        except PermissionError:
            raise UserError(f"cannot read {path}: permission denied.") from None
        except OSError as err:
            raise UserError(f"cannot read {path}: {err.strerror or err}.") from None

    @contextlib.contextmanager
    def _open(self, offset: int = 0) -> Iterator[IO[bytes]]:
        # A GzipFile does not close a file object it was given: both are closed here.
        with open(self.path, "rb") as raw:
            raw.seek(offset)
            if self.gzip:
                with gzip.GzipFile(fileobj=raw, mode="rb") as member:
                    yield member  # type: ignore[misc]
            else:
                yield raw

    def _read_header(self) -> Header:
        try:
            with self._open() as f:
                first = f.readline(MAX_HEADER_BYTES)
                if not first:
                    # Not damage: a recorder that never got going (or a gzip of nothing).
                    raise UserError(f"{self.path} is empty: it holds no recording, not even "
                                    "a header line.")
                obj = json.loads(first)
                times = self._probe_times(f) if isinstance(obj, dict) else []
        except (OSError, EOFError, ValueError, zlib.error, RecursionError):
            raise UserError(f"{self.path} is not a fleetdeck recording (unreadable "
                            "header line).") from None
        if not isinstance(obj, dict) or "fleetdeck_recording" not in obj:
            raise UserError(f"{self.path} is not a fleetdeck recording (line 1 has no "
                            "'fleetdeck_recording' header).")
        version = obj["fleetdeck_recording"]
        if version != FORMAT_VERSION:
            raise UserError(f"{self.path} is recording format version {version!s:.10}; this "
                            f"fleetdeck reads version {FORMAT_VERSION}.")
        if "cluster" not in obj or "started" not in obj:
            raise UserError(f"{self.path}: line 1, header misses 'cluster' or 'started'.")
        cluster = obj["cluster"]
        if not isinstance(cluster, str) or not is_valid_id(cluster):
            raise UserError(f"{self.path}: line 1, header cluster {str(cluster)[:40]!r} is not a "
                            "cluster name.")
        started = self._check_started(obj["started"], times)
        judged = _judged(obj.get("judged_at_start", []))
        if judged is None:
            self.report.problem(f"{self.path}: line 1, header 'judged_at_start' is not a "
                                "list of nodes with a verdict and findings; ignored")
        return Header(cluster, started, str(obj.get("fleetdeck", "?")),
                      str(obj.get("source", "")), judged or ())

    @staticmethod
    def _probe_times(f: IO[bytes]) -> list[float]:
        """Times of the first few lines after the header: what 'started' is judged against."""
        times: list[float] = []
        for _ in range(PROBE_LINES):
            try:
                line = f.readline(MAX_LINE_BYTES)
                if not line.endswith(b"\n"):
                    break
                obj = json.loads(line)
                times.append(_number(obj["t"], "time"))
            except (OSError, EOFError, zlib.error):
                break
            except (ValueError, KeyError, TypeError, OverflowError, RecursionError):
                continue
            if len(times) >= PROBE_TIMES:
                break
        return times

    def _check_started(self, raw: Any, times: list[float]) -> float:
        """The header's start time, or, when it is damaged (not a number, or nowhere near the
        first messages: 0 would make a replay tick through 56 years), the earliest of the first
        messages' times that agree with each other."""
        try:
            started: float | None = _number(raw, "started")
        except (_Damage, OverflowError):
            started = None
        if not times:
            if started is None:
                self.report.problem(f"{self.path}: line 1, header 'started' {str(raw)[:30]!r} "
                                    "is not a time, and no message says when it began")
                return 0.0
            return started
        mid = _median(times)
        agreeing = [t for t in times if abs(t - mid) <= MAX_JUMP_S]
        if started is not None and any(abs(started - t) <= MAX_JUMP_S for t in agreeing):
            return started
        fixed = min(agreeing)
        why = ("is not a time" if started is None else
               f"is not within {MAX_JUMP_S / 86400:.0f} days of the first messages")
        self.report.problem(f"{self.path}: line 1, header 'started' {str(raw)[:30]!r} {why}; "
                            f"replaying from the first message's time ({fixed:.3f})")
        return fixed

    def _load_index(self) -> list[tuple[float, int]]:
        """The sidecar index, checked entry by entry against the recording (each offset must
        start a keyframe line of the same time); a damaged or stale one is ignored as a whole,
        with a problem counted, and the reader scans from the start instead."""
        idx = self.path.with_name(self.path.name + ".idx")
        try:
            if not idx.is_file():
                return []
            if idx.stat().st_size > MAX_INDEX_BYTES:
                raise _Damage(f"larger than {MAX_INDEX_BYTES >> 20} MiB")
            text = idx.read_text("utf-8")
            segments = self._check_index(text)
        except (OSError, ValueError, KeyError, TypeError, OverflowError, RecursionError,
                EOFError, zlib.error) as err:
            why = str(err) if isinstance(err, _Damage) else f"{type(err).__name__}: {err}"
            self.report.problem(f"{idx}: damaged index ({why[:100]}); ignored it and read the "
                                "recording from the start")
            return []
        return segments

    def _check_index(self, text: str) -> list[tuple[float, int]]:
        size = self.path.stat().st_size
        segments: list[tuple[float, int]] = []
        last = self.header.started
        for n, line in enumerate(text.splitlines(), 1):
            entry = json.loads(line)
            if not isinstance(entry, dict):
                raise _Damage(f"line {n} is not a JSON object")
            t = _number(entry["t"], f"line {n}: time")
            offset = entry["offset"]
            if isinstance(offset, bool) or not isinstance(offset, int) or not 0 < offset < size:
                raise _Damage(f"line {n}: offset {str(offset)[:20]} is outside the recording")
            if segments and (offset <= segments[-1][1] or t < segments[-1][0]):
                raise _Damage(f"line {n} goes backwards")
            if abs(t - last) > MAX_JUMP_S:
                raise _Damage(f"line {n}: time jumps more than {MAX_JUMP_S / 86400:.0f} days")
            segments.append((t, offset))
            last = t
        with open(self.path, "rb") as raw:
            for t, offset in segments:
                self._check_segment_start(raw, t, offset)
        return segments

    def _check_segment_start(self, raw: IO[bytes], t: float, offset: int) -> None:
        # Only the first bytes: a keyframe line can be megabytes, the writer puts "t" first.
        if not self.gzip:
            raw.seek(offset - 1)
            head = raw.read(KEYFRAME_PROBE_BYTES + 1)
            if head[:1] != b"\n":
                raise _Damage(f"offset {offset} is not the start of a line")
            head = head[1:]
        else:
            raw.seek(offset)
            try:
                with gzip.GzipFile(fileobj=raw, mode="rb") as member:
                    head = member.read(KEYFRAME_PROBE_BYTES)
            except (OSError, EOFError, zlib.error):
                raise _Damage(f"offset {offset} is not the start of a compressed segment") \
                    from None
        found = _KEYFRAME_HEAD.match(head)
        if found is None:
            raise _Damage(f"offset {offset} does not hold a keyframe")
        if abs(float(found.group(1)) - t) > 1e-3:
            raise _Damage(f"offset {offset} holds the keyframe of another time")

    def messages(self, start: float | None = None) -> Iterator[Recorded]:
        """Messages in order. With ``start``, begin at the segment holding it: its keyframe
        (messages with ``keyframe=True``), then every message of the segment, including those
        before ``start`` — together they make the state at ``start``."""
        yield from self._iter_from(*self._segment_for(start), True)

    def scan(self, start: float | None = None,
             cursor: ReadCursor | None = None) -> Iterator["Scanned"]:
        """As :meth:`messages`, but each payload stays undecoded until :meth:`payload` asks
        for it: a headless replay decodes only the samples a tick needs (docs/recording.md).
        A ``cursor`` is kept at the scan's latest ``ReadMark``."""
        offset, t0 = self._segment_for(start)
        yield from self._scan_from(offset, True, t0, cursor=cursor)

    def scan_after(self, t: float) -> Iterator["Scanned"]:
        """What :meth:`scan` from the start yields after every message up to ``t``: the rest of
        the recording, for a reader that already holds what came before (a replay that put a
        snapshot of that instant back). Read from the segment holding ``t``, not the start;
        its keyframe entries are of that segment's start, so never after ``t``."""
        for msg in self.scan_segment(t):
            if msg.t > t:
                yield msg

    def scan_segment(self, t: float, cursor: ReadCursor | None = None) -> Iterator["Scanned"]:
        """:meth:`scan` from the start of the segment holding ``t`` (from the start without an
        index): what :meth:`scan_after` reads through, for a caller that skips to ``t`` in
        steps of its own."""
        offset, t0 = self._segment_for(t)
        return self._scan_from(offset, True, t0, cursor=cursor)

    def scan_from(self, mark: ReadMark, cursor: ReadCursor | None = None) -> Iterator["Scanned"]:
        """What the scan that left ``mark`` yielded after it: the lines of its last read and
        the rest of the file (a caller skips what it had of that read, by time, as
        :meth:`scan_after` does)."""
        return self._scan_from(mark.base, mark.use_keyframe, mark.last, cursor=cursor,
                               resume=mark)

    def _segment_for(self, start: float | None) -> tuple[int, float]:
        offset, t0 = 0, self.header.started
        # From the start, the first keyframe still counts: it holds what a console knew before
        # it began recording (RecordingWriter.seed); for `fleetdeck record` it is empty.
        if start is not None:
            candidates = [(t, off) for t, off in self.segments if t <= start]
            if candidates:
                t0, offset = candidates[-1]
        return offset, t0

    def payload(self, msg: "Scanned") -> bytes | None:
        """The message's payload; None when its line turns out damaged, counted like any damaged
        line (only a line whose payload is needed is decoded, so only those are checked)."""
        if msg.raw is None:
            return msg.known
        try:
            text = _decode_str(msg.raw[msg.p_at:len(msg.raw) - 2])
            return text.encode("utf-8", errors="surrogateescape")
        except (msgspec.DecodeError, ValueError):
            pass
        # Not the writer's own shape after all (extra keys, odd escapes): the full parser has
        # the last word, and words the damage as it would have on the first read.
        try:
            kind, _t, body = self._parse(msg.raw, msg.t)
            if kind == "message":
                return body.payload  # type: ignore[no-any-return]
            raise _Damage("not a message line")
        except _Damage as err:
            self.report.problem(f"{self.path}: {msg.where()}: {err}")
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError,
                RecursionError) as err:
            self.report.problem(f"{self.path}: {msg.where()}: {line_fault(err)}")
        return None

    def _iter_from(self, offset: int, t0: float, use_keyframe: bool) -> Iterator[Recorded]:
        for msg in self._scan_from(offset, use_keyframe, t0):
            payload = self.payload(msg)
            if payload is not None:
                yield Recorded(msg.t, msg.topic, payload, msg.qos, msg.retain, msg.keyframe)

    def _scan_from(self, offset: int, use_keyframe: bool, t0: float,
                   cursor: ReadCursor | None = None,
                   resume: ReadMark | None = None) -> Iterator["Scanned"]:
        """Read from ``offset`` (0, or a segment's start whose time is ``t0``), in large reads.

        A line in the writer's own shape (``{"t":…,"topic":…,"qos":…,"retain":…,"p":"…"}``)
        is taken apart by one anchored regex and its payload left encoded; anything else
        (keyframes, gaps, ``b64`` payloads, hand-written or damaged lines) goes through the
        full JSON parser, with the same checks either way."""
        rep = self.report
        lineno = 0
        last = t0
        head = _MSG_HEAD.match
        buf = b""
        pos = 0
        eof = False
        overlong = False
        lost: tuple[float, int | None] | None = None
        """Since a damaged member was skipped: the last time read before it, and its note's
        index in ``problems``, until the next line's time closes the span."""
        if resume is not None:
            lineno, buf, overlong = resume.lineno, resume.tail, resume.overlong

        def at() -> str:
            return _where(lineno, offset)

        if resume is None:
            chunks = self._chunks(offset, cursor=cursor)
            first: tuple[int, Any, bytes] = (offset, None, b"")
        else:
            chunks = self._chunks(resume.offset, cursor=cursor,
                                  resume=(resume.inflate, resume.unused))
            first = (resume.offset, resume.inflate, resume.unused)
        if cursor is not None:
            cursor._chunks = first  # the first mark: nothing read yet
        try:
            while True:
                nl = buf.find(b"\n", pos)
                if nl < 0:
                    if eof:
                        if pos < len(buf):
                            lineno += 1
                            rep.lines += 1
                            rep.truncated = True
                            rep.problem(f"{self.path}: last {at()} is cut off (truncated)")
                        return
                    if len(buf) - pos >= MAX_LINE_BYTES:
                        # Drop what was read of an overlong line; skip to its end.
                        overlong = True
                        buf, pos = b"", 0
                    if cursor is not None:
                        cursor.mark = ReadMark(*cursor._chunks, buf[pos:], lineno, last,
                                               use_keyframe, overlong, offset)
                    try:
                        chunk = next(chunks, b"")
                    except EOFError:
                        rep.truncated = True
                        rep.problem(f"{self.path}: compressed data ends early after {at()} "
                                    "(truncated recording)")
                        return
                    except _Corrupt as err:
                        # Bytes changed in the middle (a bad CRC, an invalid block): damage,
                        # not a recording cut short (a newcomer's run read "truncated"). The
                        # file is many gzip members: reading goes on at the next intact one.
                        said = f"{self.path}: compressed data is corrupt after {at()} ({err})"
                        resync = self._next_member(err.resync_from)
                        if resync is None:
                            rep.unreadable_rest = True
                            rep.problem(said)
                            return
                        rep.problem(said)
                        note = len(rep.problems) - 1 if rep.skipped <= MAX_NOTES else None
                        if lost is None:  # else the span goes on from the first damage
                            lost = (last, note)
                        chunks.close()
                        offset, lineno = resync, 0
                        chunks = self._chunks(offset, cursor=cursor)
                        if cursor is not None:
                            cursor._chunks = (offset, None, b"")
                        # What was inflated of the damaged member's last line goes with it.
                        buf, pos, overlong = b"", 0, False
                        # The next keyframe puts back what the skipped part held (births,
                        # statuses, a job's status), as at a seek.
                        use_keyframe = True
                        continue
                    except (OSError, zlib.error) as err:
                        rep.unreadable_rest = True
                        rep.problem(f"{self.path}: compressed data is corrupt after {at()} "
                                    f"({err})")
                        return
                    if not chunk:
                        eof = True
                        if overlong:
                            lineno += 1
                            rep.lines += 1
                            rep.truncated = True
                            rep.problem(f"{self.path}: last {at()} is cut off (truncated)")
                            return
                    buf = buf[pos:] + chunk if pos < len(buf) else chunk
                    pos = 0
                    continue
                start, pos = pos, nl + 1
                lineno += 1
                rep.lines += 1
                if overlong:
                    overlong = False
                    rep.problem(f"{self.path}: {at()}: longer than {MAX_LINE_BYTES >> 20} MiB")
                    continue
                m = head(buf, start, nl)
                if m is not None and nl - 2 >= m.end() and buf[nl - 2:nl] == b'"}':
                    t = float(m.group(1))  # at most 12 digits: finite, not negative
                    if not last <= t <= last + MAX_JUMP_S:  # else _check_time passes it as is
                        try:
                            t = _check_time(t, last)
                        except _Damage as err:
                            rep.problem(f"{self.path}: {at()}: {err}")
                            continue
                    last = t
                    if lost is not None:
                        self._read_on(lost, t)
                        lost = None
                    line = buf[start:nl + 1]
                    yield Scanned(t, m.group(2).decode("ascii"), int(m.group(3)),
                                  m.group(4) == b"true", False, line, m.end() - 1 - start,
                                  None, lineno, offset)
                    continue
                line = buf[start:nl + 1]
                try:
                    kind, t, body = self._parse(line, last)
                except _Damage as err:
                    rep.problem(f"{self.path}: {at()}: {err}")
                    continue
                except (ValueError, KeyError, TypeError, AttributeError, OverflowError,
                        RecursionError) as err:
                    rep.problem(f"{self.path}: {at()}: {line_fault(err)}")
                    continue
                if kind == "header":
                    continue
                last = t
                if lost is not None:
                    self._read_on(lost, t)
                    lost = None
                if kind == "keyframe":
                    if use_keyframe:
                        use_keyframe = False
                        for topic, payload in body:
                            yield Scanned(t, topic, 0, False, True, None, 0, payload, lineno,
                                          offset)
                elif kind == "gap":
                    rep.gap(f"{self.path}: no data for {t - body[0]:.1f} s, from "
                            f"{body[0] - self.header.started:.1f} s to "
                            f"{t - self.header.started:.1f} s into the recording ({body[1]})",
                            body[0], t, body[1])
                else:
                    msg = body
                    yield Scanned(msg.t, msg.topic, msg.qos, msg.retain, False, None, 0,
                                  msg.payload, lineno, offset)
        finally:
            chunks.close()

    def _chunks(self, offset: int, cursor: ReadCursor | None = None,
                resume: tuple[Any, bytes] | None = None) -> Generator[bytes, None, None]:
        """The recording from ``offset`` on, decompressed, in large pieces. Gzip members are
        inflated here rather than by GzipFile so that what precedes a cut-off end still comes
        out before the EOFError (GzipFile drops a whole read's worth). With a ``cursor``, the
        state after each piece is noted on it (a ``ReadMark``'s); ``resume`` goes on from one
        (a decompressor, or None, and what it had not inflated yet)."""
        with open(self.path, "rb") as raw:
            raw.seek(offset)
            if not self.gzip:
                while chunk := raw.read(READ_BYTES):
                    self.bytes_read = raw.tell()
                    if cursor is not None:
                        cursor._chunks = (raw.tell(), None, b"")
                    yield chunk
                return
            data = b""
            member_at = offset
            if resume is not None and resume[0] is not None:
                inflate, pending = resume[0].copy(), True  # the mark's stays as it was
            else:
                inflate, pending = zlib.decompressobj(31), False
                if resume is not None:
                    data = resume[1]
                    member_at = offset - len(data)
            while True:
                while data:
                    fed_at = raw.tell() - len(data)
                    try:
                        out = inflate.decompress(data)
                    except zlib.error as err:
                        # The member ends after the bytes fed now (a bad check is found at
                        # its end), and the next one after its own start.
                        raise _Corrupt(err, max(member_at + 1, fed_at)) from None
                    pending = True
                    data = b""
                    if inflate.eof:
                        # The next member (one per segment, docs/recording.md) starts here.
                        data, pending = inflate.unused_data, False
                        member_at = raw.tell() - len(data)
                        inflate = zlib.decompressobj(31)
                    if out:
                        if cursor is not None:
                            cursor._chunks = (raw.tell(), inflate.copy() if pending else None,
                                              data)
                        yield out
                data = raw.read(READ_BYTES >> 2)
                if not data:
                    break
                self.bytes_read = raw.tell()
            if pending:
                raise EOFError("Compressed file ended before the end-of-stream marker was "
                               "reached")

    def _read_on(self, lost: tuple[float, int | None], t: float) -> None:
        """The first time read after a skipped member, at ``t``: the stretch it cost, as a span
        and in its note."""
        since, note = lost
        rep = self.report
        rep.unreadable(since, t)
        if note is not None:
            start = self.header.started
            rep.problems[note] += (f"; read on at the next intact part: {t - since:.1f} s lost, "
                                   f"from {since - start:.1f} s to {t - start:.1f} s into the "
                                   "recording")

    def _next_member(self, at: int) -> int | None:
        """The offset of the first intact gzip member at or after ``at``, None if none is: a
        candidate's header must inflate to the start of a line (a JSON object), so three bytes
        that happen to look like a header inside compressed data are passed over."""
        with open(self.path, "rb") as raw:
            while True:
                raw.seek(at)
                window = raw.read(READ_BYTES)
                if len(window) < len(GZIP_MAGIC):
                    return None
                found = window.find(GZIP_MAGIC)
                if found < 0:
                    at += len(window) - len(GZIP_MAGIC) + 1
                    continue
                at += found
                raw.seek(at)
                probe = zlib.decompressobj(31)
                try:
                    head = probe.decompress(raw.read(RESYNC_PROBE_BYTES), 1)
                except zlib.error:
                    head = b""
                if head == b"{":
                    return at
                at += 1

    def _parse(self, line: bytes, last: float) -> _Line:
        """One line, checked: ('header'|'keyframe'|'gap'|'message', time, what it holds)."""
        obj = json.loads(line)
        if not isinstance(obj, dict):
            raise _Damage("not a JSON object")
        if "fleetdeck_recording" in obj:
            return "header", last, None
        t = _check_time(obj.get("t"), last)
        if "keyframe" in obj:
            frame = obj["keyframe"]
            if not isinstance(frame, list):
                raise _Damage("keyframe is not a list")
            # Decoded whole before anything is yielded: a bad entry skips the keyframe, not
            # half of it.
            entries = []
            for entry in frame:
                if not isinstance(entry, list) or len(entry) != 2:
                    raise _Damage("keyframe entry is not a [topic, payload] pair")
                entries.append((_check_topic(entry[0]), _decode_payload(entry[1])))
            return "keyframe", t, entries
        if "gap" in obj:
            gap = obj["gap"]
            if not isinstance(gap, dict):
                raise _Damage("gap is not an object")
            since = _number(gap.get("from"), "gap start")
            if not t - MAX_JUMP_S <= since <= t:
                raise _Damage("gap start is after its end or more than "
                              f"{MAX_JUMP_S / 86400:.0f} days before it")
            return "gap", t, (since, str(gap.get("reason", "no reason given"))[:200])
        retain = obj.get("retain", False)
        if not isinstance(retain, bool):
            raise _Damage(f"retain {str(retain)[:10]!r} is not true or false")
        msg = Recorded(t, _check_topic(obj.get("topic")), _decode_payload(obj),
                       _check_qos(obj.get("qos", 0)), retain)
        return "message", t, msg

    def end_time(self) -> float:
        """Time of the last readable message: from the last indexed segment, or from the start
        when that segment has none (one cut off before its first message must not end the
        replay where it begins)."""
        saved = self.report
        self.report = ReadReport()
        starts = [(self.header.started, 0)]
        if self.segments:
            starts.insert(0, self.segments[-1])
        try:
            for t0, offset in starts:
                last: float | None = None
                for msg in self._scan_from(offset, False, t0):
                    last = msg.t
                if last is not None:
                    return last
            return self.header.started
        finally:
            self.report = saved


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def read_all(path: Path) -> tuple[RecordingReader, list[Recorded]]:
    reader = RecordingReader(path)
    return reader, list(reader.messages())
