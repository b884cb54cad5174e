"""GPUs via NVML (``nvidia-ml-py``, imported as ``pynvml``), the library under DCGM and nvidia-smi.

``pynvml`` is imported lazily and is optional: a node without it, without the driver, or without
GPUs still runs the agent, with an empty GPU inventory and the reason in ``errors``.

Units: NVML reports power in mW, energy in mJ, memory in bytes, violation time in ns; the protocol
wants W, J, MiB and ns.
"""

import contextlib
import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

from fleetdeck.agents.real.common import GpuInventoryResult, build_model, normalize_pci
from fleetdeck.protocol.fast import Ecc, GpuSample, NvLink, RowRemap
from fleetdeck.protocol.messages import GpuInventory

MIB = 2**20
# nvmlDeviceGetPerformanceState returns 32 for "unknown".
_PSTATE_UNKNOWN = 32


class NvmlUnavailable(Exception):
    """NVML cannot be used on this node at all; the message is one line for the birth's errors."""


class _GpuLost(Exception):
    """The GPU answers nothing: GPU_IS_LOST, or every core query failing (``CORE_QUERIES``)."""


CORE_QUERIES = 4
"""Utilisation, memory, temperature and power: a GPU that fails all four with an error (not
NotSupported) is lost, whatever the error."""


def load_pynvml() -> ModuleType:
    try:
        return importlib.import_module("pynvml")
    except ImportError:
        raise NvmlUnavailable(
            "NVML: python package nvidia-ml-py is not installed (pip install nvidia-ml-py)"
        ) from None


def _text(v: Any) -> str:
    # nvidia-ml-py < 11.5 returns bytes, later releases str.
    return v.decode(errors="replace") if isinstance(v, bytes) else str(v)


def _cuda_version(v: int) -> str:
    """``nvmlSystemGetCudaDriverVersion`` packs 13.1 as 13010."""
    return f"{v // 1000}.{(v % 1000) // 10}"


class NvmlReader:
    """GpuReader over NVML. ``lib`` lets tests pass a stand-in for ``pynvml``."""

    name = "nvml"

    def __init__(self, lib: ModuleType | Any | None = None) -> None:
        self._lib: Any = lib
        self._open = False
        self._handles: dict[int, Any] = {}
        self._bus: dict[int, str] = {}
        self._errors: list[str] = []
        self.unavailable: str | None = None

    # --- lifecycle ------------------------------------------------------------------------

    def open(self) -> None:
        """Initialise NVML; raises NvmlUnavailable with a one-line reason."""
        if self._open:
            return
        if self._lib is None:
            self._lib = load_pynvml()
        lib = self._lib
        try:
            lib.nvmlInit()
        except lib.NVMLError as exc:
            hint = ""
            if exc.value in (getattr(lib, "NVML_ERROR_LIBRARY_NOT_FOUND", -1),
                             getattr(lib, "NVML_ERROR_DRIVER_NOT_LOADED", -1)):
                hint = " (is the NVIDIA driver installed and loaded?)"
            elif exc.value == getattr(lib, "NVML_ERROR_LIB_RM_VERSION_MISMATCH", -1):
                # NVML's own words ("RM has detected an NVML/RM version mismatch.") do not say
                # the usual cause, a driver upgraded under a running kernel module.
                hint = (" (the NVIDIA driver's libraries are not its loaded kernel module's: "
                        "upgraded without a reboot? reboot the node)")
            raise NvmlUnavailable(f"NVML: init failed: {_text(exc)}{hint}") from None
        self._open = True

    def close(self) -> None:
        if self._open:
            with contextlib.suppress(self._lib.NVMLError):
                self._lib.nvmlShutdown()
            self._open = False

    # --- GpuReader ------------------------------------------------------------------------

    def inventory(self) -> GpuInventoryResult:
        try:
            self.open()
        except NvmlUnavailable as exc:
            self.unavailable = str(exc)
            return GpuInventoryResult(gpus=[], errors=[str(exc)])
        self.unavailable = None
        lib = self._lib
        self._errors = []
        driver = self._call("system", lib.nvmlSystemGetDriverVersion)
        cuda_raw = self._call("system", lib.nvmlSystemGetCudaDriverVersion)
        count = self._call("system", lib.nvmlDeviceGetCount)
        gpus: list[GpuInventory] = []
        self._handles, self._bus = {}, {}
        for i in range(int(count or 0)):
            where = f"gpu{i}"
            try:
                h = self._call(where, lib.nvmlDeviceGetHandleByIndex, i)
                if h is None:
                    continue
                pci = self._call(where, lib.nvmlDeviceGetPciInfo, h)
                mem = self._call(where, lib.nvmlDeviceGetMemoryInfo, h)
                values: dict[str, Any] = {
                    "index": i,
                    "uuid": _text(self._call(where, lib.nvmlDeviceGetUUID, h) or ""),
                    "name": _text(self._call(where, lib.nvmlDeviceGetName, h) or ""),
                    "pci_bus_id": _text(pci.busId) if pci is not None else "",
                }
                if mem is not None:
                    values["memory_mib"] = int(mem.total) // MIB
            except _GpuLost:
                self._errors.append(f"{where}: GPU is lost (fell off the bus?)")
                continue
            self._handles[i] = h
            self._bus[i] = values["pci_bus_id"]
            gpus.append(build_model(GpuInventory, values, self._errors, where))
        return GpuInventoryResult(
            gpus=gpus,
            driver_version=_text(driver) if driver is not None else None,
            cuda_version=_cuda_version(int(cuda_raw)) if cuda_raw is not None else None,
            errors=self._errors,
            devices=int(count or 0),
        )

    def read(self) -> tuple[list[GpuSample], list[str]]:
        if not self._open:
            return [], [self.unavailable or "NVML: not initialised"]
        self._errors = []
        samples = []
        for i, h in sorted(self._handles.items()):
            try:
                samples.append(self._sample(i, h))
            except _GpuLost as lost:
                self._errors.append(f"gpu{i} ({self._bus.get(i, '?')}): "
                                    f"{lost.args[0] if lost.args else 'GPU is lost'}")
                samples.append(GpuSample(index=i, present=False))
        return samples, self._errors

    def pci_bus_ids(self) -> dict[str, int]:
        return {normalize_pci(b): i for i, b in self._bus.items() if b}

    # --- internals ------------------------------------------------------------------------

    def _call(self, where: str, fn: Callable[..., Any], *args: Any) -> Any:
        """One NVML call: NotSupported is an absent field, GPU-lost aborts the GPU, anything
        else is an absent field plus an error line."""
        lib = self._lib
        try:
            return fn(*args)
        except lib.NVMLError as exc:
            code = exc.value
            if code == lib.NVML_ERROR_NOT_SUPPORTED:
                return None
            if code == lib.NVML_ERROR_GPU_IS_LOST:
                raise _GpuLost() from None
            name = getattr(fn, "__name__", "nvml")
            self._errors.append(f"{where}: {name}: {_text(exc)}")
            return None

    def _fields(self, where: str, h: Any, ids: dict[str, int]) -> dict[str, int | float]:
        lib = self._lib
        if not hasattr(lib, "nvmlDeviceGetFieldValues"):
            return {}
        got = self._call(where, lib.nvmlDeviceGetFieldValues, h, list(ids.values()))
        out: dict[str, int | float] = {}
        if got is None:
            return out
        members = {
            lib.NVML_VALUE_TYPE_DOUBLE: "dVal",
            lib.NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
            lib.NVML_VALUE_TYPE_UNSIGNED_LONG: "ulVal",
            lib.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
            lib.NVML_VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
            lib.NVML_VALUE_TYPE_SIGNED_INT: "siVal",
        }
        for name, fv in zip(ids, got, strict=False):
            if fv.nvmlReturn != 0 or fv.valueType not in members:
                continue
            out[name] = getattr(fv.value, members[fv.valueType])
        return out

    def _sample(self, i: int, h: Any) -> GpuSample:
        lib = self._lib
        w = f"gpu{i}"
        call = self._call
        v: dict[str, Any] = {"index": i}
        before = len(self._errors)
        util = call(w, lib.nvmlDeviceGetUtilizationRates, h)
        if util is not None:
            v["util_pct"] = float(util.gpu)
            v["mem_util_pct"] = float(util.memory)
        mem = call(w, lib.nvmlDeviceGetMemoryInfo, h)
        if mem is not None:
            v["fb_used_mib"] = int(mem.used) // MIB
            v["fb_total_mib"] = int(mem.total) // MIB
        temp = call(w, lib.nvmlDeviceGetTemperature, h, lib.NVML_TEMPERATURE_GPU)
        if temp is not None:
            v["temp_c"] = float(temp)
        power = call(w, lib.nvmlDeviceGetPowerUsage, h)
        if power is not None:
            v["power_w"] = int(power) / 1000
        if (len(self._errors) - before >= CORE_QUERIES
                and (util, mem, temp, power) == (None, None, None, None)):
            # A GPU that fell off the bus often answers Unknown Error, not GPU_IS_LOST: it
            # read present with every field empty (and no G1) while 24 error lines crowded
            # the rest out (a real-node audit).
            reason = self._errors[before].split(": ", 2)[-1]
            del self._errors[before:]
            raise _GpuLost(f"every query fails ({reason}): fell off the bus?")
        limit = call(w, lib.nvmlDeviceGetEnforcedPowerLimit, h)
        if limit is not None:
            v["power_limit_w"] = int(limit) / 1000
        energy = call(w, lib.nvmlDeviceGetTotalEnergyConsumption, h)
        if energy is not None:
            v["energy_j"] = int(energy) / 1000
        for attr, fn, clock in (
            ("sm_clock_mhz", lib.nvmlDeviceGetClockInfo, lib.NVML_CLOCK_SM),
            ("mem_clock_mhz", lib.nvmlDeviceGetClockInfo, lib.NVML_CLOCK_MEM),
            ("sm_clock_max_mhz", lib.nvmlDeviceGetMaxClockInfo, lib.NVML_CLOCK_SM),
        ):
            got = call(w, fn, h, clock)
            if got is not None:
                v[attr] = float(got)
        reasons_fn = getattr(lib, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            lib, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
        if reasons_fn is not None:
            reasons = call(w, reasons_fn, h)
            if reasons is not None:
                v["clock_event_reasons"] = int(reasons)
        for attr, policy in (("thermal_violation_ns", lib.NVML_PERF_POLICY_THERMAL),
                             ("power_violation_ns", lib.NVML_PERF_POLICY_POWER)):
            got = call(w, lib.nvmlDeviceGetViolationStatus, h, policy)
            if got is not None:
                v[attr] = int(got.violationTime)
        pstate = call(w, lib.nvmlDeviceGetPerformanceState, h)
        if pstate is not None and int(pstate) != _PSTATE_UNKNOWN:
            v["pstate"] = f"P{int(pstate)}"
        for attr, fn in (("pcie_gen", lib.nvmlDeviceGetCurrPcieLinkGeneration),
                         ("pcie_width", lib.nvmlDeviceGetCurrPcieLinkWidth),
                         ("pcie_replay_total", lib.nvmlDeviceGetPcieReplayCounter)):
            got = call(w, fn, h)
            if got is not None:
                v[attr] = int(got)
        v["ecc"] = self._ecc(w, h)
        remap = call(w, lib.nvmlDeviceGetRemappedRows, h)
        if remap is not None:
            corr, unc, pending, failure = remap
            v["row_remap"] = build_model(
                RowRemap, {"correctable": int(corr), "uncorrectable": int(unc),
                           "pending": bool(pending), "failure": bool(failure)},
                self._errors, f"{w} row_remap")
        fields = self._fields(w, h, {
            "mem_temp": lib.NVML_FI_DEV_MEMORY_TEMP,
            "links": lib.NVML_FI_DEV_NVLINK_LINK_COUNT,
            "crc_flit": lib.NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL,
            "crc_data": lib.NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL,
            "replay": lib.NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL,
            "recovery": lib.NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL,
        })
        if "mem_temp" in fields and fields["mem_temp"] > 0:
            # 0 means "no HBM sensor" on boards without one, not 0 degrees.
            v["mem_temp_c"] = float(fields["mem_temp"])
        v["nvlink"] = self._nvlink(w, h, fields)
        return build_model(GpuSample, v, self._errors, w)

    def _ecc(self, w: str, h: Any) -> Ecc:
        lib = self._lib
        call = self._call
        vals: dict[str, int] = {}
        for attr, err, counter in (
            ("sbe_vol", lib.NVML_MEMORY_ERROR_TYPE_CORRECTED, lib.NVML_VOLATILE_ECC),
            ("dbe_vol", lib.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, lib.NVML_VOLATILE_ECC),
            ("sbe_agg", lib.NVML_MEMORY_ERROR_TYPE_CORRECTED, lib.NVML_AGGREGATE_ECC),
            ("dbe_agg", lib.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, lib.NVML_AGGREGATE_ECC),
        ):
            got = call(w, lib.nvmlDeviceGetTotalEccErrors, h, err, counter)
            if got is not None:
                vals[attr] = int(got)
        for attr, err in (("sram_corr_agg", lib.NVML_MEMORY_ERROR_TYPE_CORRECTED),
                          ("sram_unc_agg", lib.NVML_MEMORY_ERROR_TYPE_UNCORRECTED)):
            got = call(w, lib.nvmlDeviceGetMemoryErrorCounter, h, err, lib.NVML_AGGREGATE_ECC,
                       lib.NVML_MEMORY_LOCATION_SRAM)
            if got is not None:
                vals[attr] = int(got)
        return build_model(Ecc, vals, self._errors, f"{w} ecc")

    def _nvlink(self, w: str, h: Any, fields: dict[str, int | float]) -> NvLink:
        lib = self._lib
        vals: dict[str, int] = {k: int(fields[k]) for k in
                                ("crc_flit", "crc_data", "replay", "recovery") if k in fields}
        total = int(fields["links"]) if "links" in fields else None
        if total:
            up = 0
            for link in range(total):
                state = self._call(w, lib.nvmlDeviceGetNvLinkState, h, link)
                if state == lib.NVML_FEATURE_ENABLED:
                    up += 1
            vals["links_up"] = up
            vals["links_total"] = total
        return build_model(NvLink, vals, self._errors, f"{w} nvlink")
