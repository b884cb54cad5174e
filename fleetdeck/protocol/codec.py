"""Bytes <-> models, with every way a payload can be wrong named by a short reason code."""

import json
from enum import StrEnum
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from fleetdeck.protocol.messages import (
    PROTOCOL_MAJOR,
    Ack,
    Birth,
    Command,
    Event,
    JobStatus,
    Status,
    Telemetry,
)
from fleetdeck.protocol.topics import Kind

DEFAULT_MAX_PAYLOAD = 64 * 1024
"""Bytes. A full 8-GPU/8-port telemetry message is about 6 KiB."""

M = TypeVar("M", bound=BaseModel)


class Reason(StrEnum):
    OVERSIZE = "oversize"
    NOT_JSON = "not_json"
    UNKNOWN_VERSION = "unknown_version"
    INVALID = "invalid"
    MISMATCH = "mismatch"
    BAD_TOPIC = "bad_topic"


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
}


def encode(msg: BaseModel) -> bytes:
    return msg.model_dump_json(exclude_none=True, by_alias=True).encode()


def decode(model: type[M], payload: bytes, max_size: int = DEFAULT_MAX_PAYLOAD) -> M:
    """Validate ``payload`` as ``model``; raise :class:`DecodeError` with a reason code."""
    if len(payload) > max_size:
        raise DecodeError(Reason.OVERSIZE, f"{len(payload)} bytes > limit {max_size}")
    try:
        return model.model_validate_json(payload)
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
