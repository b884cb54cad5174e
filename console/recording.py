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
  target instead of the beginning.

``.gz`` files are multi-member gzip, one member per segment, so a segment can be decompressed on
its own. Either way a sidecar ``FILE.idx`` (JSON Lines ``{"t": …, "offset": …}``, one per segment)
makes seeking fast; without it (or if it is damaged) the reader scans from the start.
"""

import base64
import contextlib
import gzip
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from fleetdeck import __version__
from fleetdeck.errors import UserError
from fleetdeck.protocol.topics import Kind, TopicError, parse_topic

FORMAT_VERSION = 1
KEYFRAME_KINDS = frozenset({Kind.BIRTH, Kind.STATUS, Kind.TELEMETRY, Kind.JOB})


@dataclass(frozen=True, slots=True)
class Recorded:
    t: float
    topic: str
    payload: bytes
    qos: int = 0
    retain: bool = False
    keyframe: bool = False
    """True for messages restored from a keyframe (state, not something that happened at t)."""


def _encode_payload(payload: bytes) -> dict[str, str]:
    try:
        return {"p": payload.decode("utf-8")}
    except UnicodeDecodeError:
        return {"b64": base64.b64encode(payload).decode("ascii")}


def _decode_payload(obj: dict[str, Any]) -> bytes:
    if "p" in obj:
        return str(obj["p"]).encode("utf-8", errors="surrogateescape")
    return base64.b64decode(obj["b64"], validate=True)


class RecordingWriter:
    """Append messages; start a new segment (keyframe + new gzip member) every ``segment_s``."""

    def __init__(self, path: Path, cluster: str, *, source: str = "", started: float,
                 segment_s: float = 60.0) -> None:
        self.path = path
        self.gzip = path.suffix == ".gz"
        self.segment_s = segment_s
        self._raw: IO[bytes] = open(path, "wb")  # noqa: SIM115  (closed in close())
        self._index: IO[str] = open(self._index_path(path), "w")  # noqa: SIM115
        self._z: Any = None
        self._segment_start: float | None = None
        self._latest: dict[str, bytes] = {}
        self.messages = 0
        self.bytes_in = 0
        self.closed_size = 0
        header = {"fleetdeck_recording": FORMAT_VERSION, "cluster": cluster, "started": started,
                  "fleetdeck": __version__, "source": source, "segment_s": segment_s}
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
    lines: int = 0
    skipped: int = 0
    problems: list[str] = field(default_factory=list)
    truncated: bool = False

    def problem(self, text: str) -> None:
        self.skipped += 1
        if len(self.problems) < 20:
            self.problems.append(text)


@dataclass
class Header:
    cluster: str
    started: float
    version: str
    source: str


class RecordingReader:
    """Reads a recording; tolerates truncation and bad lines, counting what it skipped."""

    def __init__(self, path: Path) -> None:
        if not path.exists():
            raise UserError(f"recording {path} does not exist.")
        self.path = path
        self.gzip = _is_gzip(path)
        self.report = ReadReport()
        self.header = self._read_header()
        self.segments = self._load_index()

    def _open(self, offset: int = 0) -> IO[bytes]:
        raw = open(self.path, "rb")  # noqa: SIM115  (closed by the caller's context)
        raw.seek(offset)
        if self.gzip:
            return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
        return raw

    def _read_header(self) -> Header:
        with self._open() as f:
            try:
                first = f.readline()
                obj = json.loads(first)
            except (OSError, EOFError, ValueError, zlib.error):
                raise UserError(f"{self.path} is not a fleetdeck recording (unreadable "
                                "header line).") from None
        if not isinstance(obj, dict) or "fleetdeck_recording" not in obj:
            raise UserError(f"{self.path} is not a fleetdeck recording (line 1 has no "
                            "'fleetdeck_recording' header).")
        version = obj["fleetdeck_recording"]
        if version != FORMAT_VERSION:
            raise UserError(f"{self.path} is recording format version {version!s:.10}; this "
                            f"fleetdeck reads version {FORMAT_VERSION}.")
        try:
            return Header(str(obj["cluster"]), float(obj["started"]),
                          str(obj.get("fleetdeck", "?")), str(obj.get("source", "")))
        except (KeyError, TypeError, ValueError):
            raise UserError(f"{self.path}: line 1, header misses 'cluster' or 'started'.") from None

    def _load_index(self) -> list[tuple[float, int]]:
        idx = self.path.with_name(self.path.name + ".idx")
        segments: list[tuple[float, int]] = []
        if not idx.exists():
            return segments
        size = self.path.stat().st_size
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            for line in idx.read_text().splitlines():
                entry = json.loads(line)
                t, offset = float(entry["t"]), int(entry["offset"])
                if 0 <= offset < size and (not segments or offset > segments[-1][1]):
                    segments.append((t, offset))
        return segments

    def messages(self, start: float | None = None) -> Iterator[Recorded]:
        """Messages in order. With ``start``, begin at the segment holding it: its keyframe
        (messages with ``keyframe=True``), then every message of the segment, including those
        before ``start`` — together they make the state at ``start``."""
        offset = 0
        # From the start, the first keyframe still counts: it holds what a console knew before
        # it began recording (RecordingWriter.seed); for `fleetdeck record` it is empty.
        use_keyframe = True
        if start is not None:
            candidates = [(t, off) for t, off in self.segments if t <= start]
            if candidates:
                offset = candidates[-1][1]
                use_keyframe = True
        yield from self._iter_from(offset, use_keyframe)

    def _iter_from(
        self, offset: int, use_keyframe: bool
    ) -> Iterator[Recorded]:
        rep = self.report
        lineno = 0
        with self._open(offset) as f:
            while True:
                try:
                    line = f.readline()
                except (OSError, EOFError, zlib.error):
                    rep.truncated = True
                    rep.problem(f"{self.path}: compressed data ends early after line {lineno} "
                                "(truncated recording)")
                    return
                if not line:
                    return
                lineno += 1
                rep.lines += 1
                if not line.endswith(b"\n"):
                    rep.truncated = True
                    rep.problem(f"{self.path}: last line {lineno} is cut off (truncated)")
                    return
                try:
                    obj = json.loads(line)
                    if "fleetdeck_recording" in obj:
                        continue
                    t = float(obj["t"])
                    if "keyframe" in obj:
                        if use_keyframe:
                            use_keyframe = False
                            for topic, payload in obj["keyframe"]:
                                yield Recorded(t, str(topic), _decode_payload(payload),
                                               keyframe=True)
                        continue
                    yield Recorded(t, str(obj["topic"]), _decode_payload(obj),
                                   int(obj.get("qos", 0)), bool(obj.get("retain", False)))
                except (ValueError, KeyError, TypeError, AttributeError) as err:
                    rep.problem(f"{self.path}: line {lineno}: {type(err).__name__}: "
                                f"{str(err)[:80]}")

    def end_time(self) -> float:
        """Time of the last readable message (scans from the last indexed segment)."""
        last = self.header.started
        start_offset = self.segments[-1][1] if self.segments else 0
        saved = self.report
        self.report = ReadReport()
        for msg in self._iter_from(start_offset, False):
            last = msg.t
        self.report = saved
        return last


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def read_all(path: Path) -> tuple[RecordingReader, list[Recorded]]:
    reader = RecordingReader(path)
    return reader, list(reader.messages())


