"""Wire protocol v1: topics, message models and the codec shared by agents and console.

Telemetry's hot path lives in ``fast`` (msgspec Structs mirroring the models) and ``wire2``
(telemetry wire format v2); the pydantic models stay the definition (docs/protocol.md).

Nothing here imports textual or rich: agents run headless on GPU nodes.
"""

from fleetdeck.protocol.codec import DecodeError, decode, encode
from fleetdeck.protocol.ids import InvalidId, validate_id
from fleetdeck.protocol.messages import (
    PROTOCOL_MAJOR,
    Ack,
    AckResult,
    Birth,
    Command,
    CommandOp,
    DrainInfo,
    DrainState,
    Event,
    GpuInventory,
    GpuSample,
    IbPortInventory,
    IbPortSample,
    JobStatus,
    Status,
    Telemetry,
)
from fleetdeck.protocol.topics import Kind, Topic, TopicError, parse_topic, topic_for

__all__ = [
    "PROTOCOL_MAJOR",
    "Ack",
    "AckResult",
    "Birth",
    "Command",
    "CommandOp",
    "DecodeError",
    "DrainInfo",
    "DrainState",
    "Event",
    "GpuInventory",
    "GpuSample",
    "IbPortInventory",
    "IbPortSample",
    "InvalidId",
    "JobStatus",
    "Kind",
    "Status",
    "Telemetry",
    "Topic",
    "TopicError",
    "decode",
    "encode",
    "parse_topic",
    "topic_for",
    "validate_id",
]
