"""Bytes <-> models, with every way a payload can be wrong named by a short reason code."""

import json
from enum import StrEnum
from typing import TypeVar, cast

import msgspec
from pydantic import BaseModel, ValidationError

from fleetdeck.protocol import fast
from fleetdeck.protocol.messages import (
    PROTOCOL_MAJOR,
    Ack,
    Birth,
    CollectorStatus,
    Command,
    Digest,
    Event,
    JobStatus,
    SchedulerStatus,
    Status,
    Telemetry,
)
from fleetdeck.protocol.topics import Kind

DEFAULT_MAX_PAYLOAD = 64 * 1024
"""Bytes. A full 8-GPU/8-port telemetry message is about 6 KiB."""

M = TypeVar("M", bound=BaseModel | msgspec.Struct)


class Reason(StrEnum):
    OVERSIZE = "oversize"
    NOT_JSON = "not_json"
    UNKNOWN_VERSION = "unknown_version"
    INVALID = "invalid"
    MISMATCH = "mismatch"
    BAD_TOPIC = "bad_topic"
    NO_KEYFRAME = "no_keyframe"
    """A v2 telemetry delta names a keyframe this console does not hold (docs/protocol.md)."""


class DecodeError(ValueError):
    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason
        self.detail = detail


MODEL_FOR_KIND: dict[Kind, type[BaseModel]] = {
    Kind.BIRTH: Birth,
    Kind.STATUS: Status,
    Kind.TELEMETRY: Telemetry,
    Kind.EVENT: Event,
    Kind.CMD: Command,
    Kind.ACK: Ack,
    Kind.JOB: JobStatus,
    Kind.SCHED_CMD: Command,
    Kind.SCHED_ACK: Ack,
    Kind.SCHED_STATUS: SchedulerStatus,
    Kind.DIGEST: Digest,
    Kind.COLLECTOR: CollectorStatus,
}


_ENCODER = msgspec.json.Encoder()


def printable_text(text: str) -> str:
    """``text`` with each non-printable character replaced by U+FFFD (see :func:`printable`)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else "\ufffd" for c in text)


def _printable_value(value: object) -> object:
    """``value`` (parsed JSON) with every string made printable; the same object if it was."""
    if isinstance(value, str):
        return printable_text(value)
    if isinstance(value, list):
        items = [_printable_value(v) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if isinstance(value, dict):
        pairs = {_printable_value(k): _printable_value(v) for k, v in value.items()}
        same = len(pairs) == len(value) and all(
            k in value and value[k] is v for k, v in pairs.items())
        return value if same else pairs
    return value


def printable(payload: bytes) -> bytes:
    """``payload`` with every string in it made printable: a control or bidi-override character
    becomes U+FFFD (docs/protocol.md, "Text from the network").

    Strings from the network reach operators' terminals (an IB port's ``state``, an agent's
    errors, an event's message, a digest's finding): an ESC in one cleared the console's
    screen and retitled the terminal (OSC 0), and ``status`` printed it raw. Replaced, not
    refused, so an XID event or a sample is never lost to one stray byte. The common payload
    (ASCII with no escape and no DEL) is returned at the cost of two byte scans (< 1 us for a
    10 KB sample); only the rest is parsed and written again."""
    if payload.isascii() and b"\\" not in payload and b"\x7f" not in payload:
        return payload
    try:
        raw = json.loads(payload)
    except (ValueError, RecursionError):
        return payload  # the decoder names what is wrong with it
    clean = _printable_value(raw)
    if clean is raw:
        return payload
    return json.dumps(clean, ensure_ascii=False, separators=(",", ":")).encode()


def encode(msg: BaseModel | msgspec.Struct) -> bytes:
    """JSON without the fields that are not reported (``None``). A fast Struct encodes with
    msgspec (``omit_defaults``; a NaN becomes ``null``, which reads as not reported)."""
    if isinstance(msg, msgspec.Struct):
        return _ENCODER.encode(msg)
    return msg.model_dump_json(exclude_none=True, by_alias=True).encode()


def decode(model: type[M], payload: bytes, max_size: int = DEFAULT_MAX_PAYLOAD) -> M:
    """Validate ``payload`` as ``model``; raise :class:`DecodeError` with a reason code.

    ``model`` may be the fast :class:`fast.Telemetry` (see :func:`decode_telemetry`) or
    :class:`fast.Birth` (the pydantic model validates; :func:`fast.birth_of`)."""
    if model is fast.Telemetry:
        return cast(M, decode_telemetry(payload, max_size))
    if model is fast.Birth:  # validated by the model, kept as the Struct
        return cast(M, fast.birth_of(decode(Birth, payload, max_size)))
    if not issubclass(model, BaseModel):
        raise TypeError(f"no decoder for {model.__name__}")
    if len(payload) > max_size:
        raise DecodeError(Reason.OVERSIZE, f"{len(payload)} bytes > limit {max_size}")
    if model is not Command:
        # A command is signed over its text as sent (fleetdeck.protocol.signing); the console
        # that signs it makes its reason printable first.
        payload = printable(payload)
    try:
        return cast(M, model.model_validate_json(payload))
    except ValidationError as err:
        raise _classify(payload, err) from None


def _classify(payload: bytes, err: ValidationError) -> DecodeError:
    # The slow path runs only for bad messages, so parsing twice here is fine.
    try:
        raw = json.loads(payload)
    except (ValueError, RecursionError):
        return DecodeError(Reason.NOT_JSON, "payload is not valid JSON")
    if isinstance(raw, dict) and "v" in raw and raw["v"] != PROTOCOL_MAJOR:
        return DecodeError(Reason.UNKNOWN_VERSION, f"protocol major {str(raw['v'])[:16]!s}")
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "(payload)"
    more = f" (+{err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return DecodeError(Reason.INVALID, f"{loc}: {first['msg']}{more}")


_TELEMETRY = msgspec.json.Decoder(fast.Telemetry)
U64_OVER = f"Input should be less than or equal to {fast.U64_MAX}"


def decode_telemetry(payload: bytes, max_size: int = DEFAULT_MAX_PAYLOAD) -> fast.Telemetry:
    """v1 telemetry into a fast Struct: accepts and rejects what :func:`decode` does with the
    pydantic model (tests/protocol_fast/test_equivalence.py), at a fraction of the cost."""
    if len(payload) > max_size:
        raise DecodeError(Reason.OVERSIZE, f"{len(payload)} bytes > limit {max_size}")
    payload = printable(payload)
    try:
        tel = _TELEMETRY.decode(payload)
    except msgspec.DecodeError:
        # Refused by msgspec: the reference model decides, and names the reason exactly as the
        # v1 path always did. It raises for all but a few spellings msgspec is stricter on
        # (``"v": 1.0`` equals the schema's ``const: 1``); those are converted.
        model = decode(Telemetry, payload, max_size)
        return msgspec.convert(model.model_dump(), fast.Telemetry)
    check_u64(tel, payload)
    return tel


_DIGEST = msgspec.json.Decoder(fast.Digest)


def decode_digest(payload: bytes, max_size: int = DEFAULT_MAX_PAYLOAD) -> fast.Digest:
    """A digest into a fast Struct (a console on digests takes thousands a second); refusals
    are named by the reference model (:class:`messages.Digest`) exactly as :func:`decode`."""
    if len(payload) > max_size:
        raise DecodeError(Reason.OVERSIZE, f"{len(payload)} bytes > limit {max_size}")
    payload = printable(payload)
    try:
        d = _DIGEST.decode(payload)
    except msgspec.DecodeError:
        pass
    else:
        # A capped GPU's clock events are a u64 (``DigestGpu``), whose ceiling msgspec does
        # not check: the model names the refusal, as of a sample's.
        if not (fast.may_hold_big_int(payload) and any(
                g.clock_event_reasons is not None and g.clock_event_reasons > fast.U64_MAX
                for g in d.gpus)):
            return d
    model = decode(Digest, payload, max_size)
    return msgspec.convert(model.model_dump(), fast.Digest)


def check_u64(tel: fast.Telemetry, payload: bytes) -> None:
    """Raise ``invalid`` for a u64 field above 2**64-1 (msgspec checks only ``>= 0``)."""
    if fast.may_hold_big_int(payload):
        loc = fast.u64_overflow(tel)
        if loc is not None:
            raise DecodeError(Reason.INVALID, f"{loc}: {U64_OVER}")
