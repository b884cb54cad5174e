"""Small helpers shared by the real-hardware readers."""

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import msgspec
from pydantic import BaseModel, ValidationError

from fleetdeck.protocol import fast
from fleetdeck.protocol.fast import GpuSample
from fleetdeck.protocol.messages import GpuInventory

M = TypeVar("M", bound=BaseModel | msgspec.Struct)

U64_MOD = 2**64
MAX_ERRORS = 32
MAX_ERROR_LEN = 2048


def build_model(cls: type[M], values: Mapping[str, Any], errors: list[str], where: str) -> M:
    """Construct ``cls``, dropping fields that fail validation instead of losing the whole sample.

    Hardware occasionally reports a value outside the protocol's sanity range (a sentinel, a
    corrupted read); one bad field must not blank every other field of that GPU or port.
    """
    kwargs = dict(values)
    for _ in range(len(kwargs) + 1):
        try:
            return _validated(cls, kwargs)
        except ValidationError as exc:
            bad = {str(e["loc"][0]) for e in exc.errors() if e["loc"]}
        except msgspec.ValidationError as exc:
            bad = _struct_error_field(str(exc), kwargs)
        droppable = bad & (kwargs.keys() - _required_fields(cls))
        if not droppable:
            return _validated(cls, kwargs)  # raises again: a required field is bad
        for name in sorted(droppable):
            errors.append(f"{where}: dropped invalid {name}={kwargs.pop(name)!r}")
    return _validated(cls, kwargs)  # pragma: no cover - the loop always returns or raises


def _validated(cls: type[M], kwargs: dict[str, Any]) -> M:
    if issubclass(cls, msgspec.Struct):
        # A Struct's constructor checks nothing; convert applies the protocol's bounds, and
        # the u64 ceiling msgspec cannot express is checked as on the console (protocol/fast.py).
        obj = msgspec.convert(kwargs, cls)
        for name in fast.u64_fields(cls):
            value = getattr(obj, name)
            if value is not None and value > fast.U64_MAX:
                raise msgspec.ValidationError(f"Expected `int` <= {fast.U64_MAX} - at `$.{name}`")
        return obj
    return cls(**kwargs)


def _struct_error_field(message: str, kwargs: Mapping[str, Any]) -> set[str]:
    # msgspec names one field: "Expected `float` >= 0.0 - at `$.util_pct`".
    _, sep, at = message.rpartition(" - at `$.")
    name = at.split("`")[0].split(".")[0].split("[")[0] if sep else ""
    return {name} if name in kwargs else set()


def _required_fields(cls: type[Any]) -> set[str]:
    if issubclass(cls, msgspec.Struct):
        return {f.name for f in msgspec.structs.fields(cls) if f.required}
    return {name for name, f in cls.model_fields.items() if f.is_required()}


def cap_errors(errors: Iterable[str]) -> list[str]:
    """Deduplicate (keeping order) and fit the protocol's limits on ``errors`` lists."""
    seen: dict[str, None] = {}
    for e in errors:
        seen.setdefault(e[:MAX_ERROR_LEN], None)
    out = list(seen)
    if len(out) > MAX_ERRORS:
        dropped = len(out) - (MAX_ERRORS - 1)
        out = [*out[: MAX_ERRORS - 1], f"... and {dropped} more errors"]
    return out


class ChangeLogger:
    """Logs a set of problems only when it changes, so a dead reader does not flood journald."""

    def __init__(self, logger: logging.Logger) -> None:
        self._log = logger
        self._current: set[str] = set()

    def update(self, errors: Iterable[str]) -> None:
        now = set(errors)
        for e in sorted(now - self._current):
            self._log.warning("%s", e)
        for e in sorted(self._current - now):
            self._log.info("resolved: %s", e)
        self._current = now


@dataclass
class GpuInventoryResult:
    gpus: list[GpuInventory]
    driver_version: str | None = None
    cuda_version: str | None = None
    errors: list[str] = field(default_factory=list)
    devices: int = 0
    """GPUs the driver counts, found or not (NVML's device count; 0: not known): a GPU lost
    before the agent started is one of them, and the node expects it."""


class GpuReader(Protocol):
    """What RealSource needs from a GPU reader (NVML or nvidia-smi)."""

    name: str

    def inventory(self) -> GpuInventoryResult: ...

    def read(self) -> tuple[list[GpuSample], list[str]]:
        """Samples keyed by inventory index, and what went wrong; never raises."""
        ...

    def close(self) -> None: ...


def normalize_pci(bus_id: str) -> str:
    """``00000000:2B:00.0`` / ``0000:2b:00`` / ``PCI:0000:2b:00`` -> ``0000:2b:00``.

    nvidia-smi and NVML print an 8-digit domain and the function; the kernel's Xid lines print a
    4-digit domain and no function. Both name the same device.
    """
    s = bus_id.strip().lower().removeprefix("pci:")
    parts = s.split(":")
    if len(parts) == 2:
        parts = ["0", *parts]
    if len(parts) != 3:
        return s
    domain, bus, dev = parts
    dev = dev.split(".")[0]
    try:
        return f"{int(domain, 16):04x}:{int(bus, 16):02x}:{int(dev, 16):02x}"
    except ValueError:
        return s
