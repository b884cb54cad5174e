"""NVML reader: degraded paths (no nvidia-ml-py, no driver) and unit conversion with a stand-in
for ``pynvml`` (this machine has neither a GPU nor the driver)."""

import sys
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from fleetdeck.agents.real.nvml import NvmlReader, NvmlUnavailable, load_pynvml
from fleetdeck.agents.real.source import make_real_source

NOT_SUPPORTED, LIB_NOT_FOUND, GPU_IS_LOST, UNKNOWN = 3, 12, 15, 999


class FakeNvmlError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return {NOT_SUPPORTED: "Not Supported", LIB_NOT_FOUND: "NVML Shared Library Not Found",
                GPU_IS_LOST: "GPU is lost"}.get(self.value, "Unknown Error")


def fake_nvml(n_gpus: int = 2, *, init_error: int | None = None, lost: set[int] | None = None,
              unsupported: set[str] | None = None, failing: set[str] | None = None):
    """The subset of pynvml the reader uses; values in NVML's own units (mW, mJ, bytes, ns)."""
    lost = lost if lost is not None else set()
    unsupported = unsupported or set()
    failing = failing or set()
    lib = SimpleNamespace(
        NVMLError=FakeNvmlError,
        NVML_ERROR_NOT_SUPPORTED=NOT_SUPPORTED, NVML_ERROR_GPU_IS_LOST=GPU_IS_LOST,
        NVML_ERROR_LIBRARY_NOT_FOUND=LIB_NOT_FOUND, NVML_ERROR_DRIVER_NOT_LOADED=9,
        NVML_ERROR_LIB_RM_VERSION_MISMATCH=18,
        NVML_TEMPERATURE_GPU=0, NVML_CLOCK_SM=1, NVML_CLOCK_MEM=2,
        NVML_PERF_POLICY_POWER=0, NVML_PERF_POLICY_THERMAL=1,
        NVML_MEMORY_ERROR_TYPE_CORRECTED=0, NVML_MEMORY_ERROR_TYPE_UNCORRECTED=1,
        NVML_VOLATILE_ECC=0, NVML_AGGREGATE_ECC=1, NVML_MEMORY_LOCATION_SRAM=7,
        NVML_FEATURE_ENABLED=1,
        NVML_VALUE_TYPE_DOUBLE=0, NVML_VALUE_TYPE_UNSIGNED_INT=1,
        NVML_VALUE_TYPE_UNSIGNED_LONG=2, NVML_VALUE_TYPE_UNSIGNED_LONG_LONG=3,
        NVML_VALUE_TYPE_SIGNED_LONG_LONG=4, NVML_VALUE_TYPE_SIGNED_INT=5,
        NVML_FI_DEV_MEMORY_TEMP=82, NVML_FI_DEV_NVLINK_LINK_COUNT=91,
        NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL=38,
        NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL=45,
        NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL=52,
        NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL=59,
        shutdowns=[],
    )

    def api(name: str, fn: Callable[..., Any]) -> None:
        def call(*args):
            if name in unsupported:
                raise FakeNvmlError(NOT_SUPPORTED)
            if name in failing:
                raise FakeNvmlError(UNKNOWN)
            if args and isinstance(args[0], int) and name != "nvmlDeviceGetHandleByIndex" \
                    and args[0] in lost:
                raise FakeNvmlError(GPU_IS_LOST)
            return fn(*args)
        call.__name__ = name
        setattr(lib, name, call)

    def init():
        if init_error is not None:
            raise FakeNvmlError(init_error)

    field_values = {82: 54, 91: 18, 38: 0, 45: 0, 52: 2, 59: 1}

    def fields(h, ids):
        return [SimpleNamespace(nvmlReturn=0, valueType=3,
                                value=SimpleNamespace(ullVal=field_values[i])) for i in ids]

    api("nvmlInit", init)
    api("nvmlShutdown", lambda: lib.shutdowns.append(1))
    api("nvmlSystemGetDriverVersion", lambda: "590.48.01")
    api("nvmlSystemGetCudaDriverVersion", lambda: 13010)
    api("nvmlDeviceGetCount", lambda: n_gpus)
    api("nvmlDeviceGetHandleByIndex", lambda i: i)
    api("nvmlDeviceGetUUID", lambda h: f"GPU-{h:08d}")
    api("nvmlDeviceGetName", lambda h: b"NVIDIA H100 80GB HBM3")  # old bindings return bytes
    api("nvmlDeviceGetPciInfo", lambda h: SimpleNamespace(busId=f"00000000:{h + 1:02X}:00.0"))
    api("nvmlDeviceGetMemoryInfo", lambda h: SimpleNamespace(total=81559 * 2**20,
                                                             used=19818 * 2**20))
    api("nvmlDeviceGetUtilizationRates", lambda h: SimpleNamespace(gpu=100, memory=11))
    api("nvmlDeviceGetTemperature", lambda h, sensor: 59)
    api("nvmlDeviceGetPowerUsage", lambda h: 631950)
    api("nvmlDeviceGetEnforcedPowerLimit", lambda h: 700000)
    api("nvmlDeviceGetTotalEnergyConsumption", lambda h: 123_456_789)
    api("nvmlDeviceGetClockInfo", lambda h, c: {1: 1980, 2: 2619}[c])
    api("nvmlDeviceGetMaxClockInfo", lambda h, c: 1980)
    api("nvmlDeviceGetCurrentClocksEventReasons", lambda h: 0x40)
    api("nvmlDeviceGetViolationStatus",
        lambda h, p: SimpleNamespace(referenceTime=0, violationTime=5000 if p == 1 else 0))
    api("nvmlDeviceGetPerformanceState", lambda h: 0)
    api("nvmlDeviceGetCurrPcieLinkGeneration", lambda h: 5)
    api("nvmlDeviceGetCurrPcieLinkWidth", lambda h: 16)
    api("nvmlDeviceGetPcieReplayCounter", lambda h: 9)
    api("nvmlDeviceGetTotalEccErrors", lambda h, t, c: 3 if (t, c) == (0, 1) else 0)
    api("nvmlDeviceGetMemoryErrorCounter", lambda h, t, c, loc: 0)
    api("nvmlDeviceGetRemappedRows", lambda h: (0, 1, 1, 0))
    api("nvmlDeviceGetFieldValues", fields)
    api("nvmlDeviceGetNvLinkState", lambda h, link: 0 if link == 17 else 1)
    return lib


def test_missing_python_package_is_a_one_line_degraded_inventory(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails as if not installed
    with pytest.raises(NvmlUnavailable, match="nvidia-ml-py is not installed"):
        load_pynvml()
    reader = NvmlReader()
    inv = reader.inventory()
    assert inv.gpus == []
    assert len(inv.errors) == 1 and "\n" not in inv.errors[0]
    assert "pip install nvidia-ml-py" in inv.errors[0]
    samples, errors = reader.read()
    assert samples == [] and errors == inv.errors


def test_missing_driver_is_a_one_line_degraded_inventory():
    reader = NvmlReader(fake_nvml(init_error=LIB_NOT_FOUND))
    inv = reader.inventory()
    assert inv.gpus == [] and inv.driver_version is None
    assert inv.errors == ["NVML: init failed: NVML Shared Library Not Found "
                          "(is the NVIDIA driver installed and loaded?)"]
    assert reader.read() == ([], inv.errors)


def test_a_driver_upgraded_without_a_reboot_says_so():
    """NVML_ERROR_LIB_RM_VERSION_MISMATCH reads 'RM has detected an NVML/RM version
    mismatch.', which G1 quoted as the node's only word on its 0/8 GPUs (a real-node drill)."""
    reader = NvmlReader(fake_nvml(init_error=18))
    [said] = reader.inventory().errors
    assert said.startswith("NVML: init failed: ") and "reboot the node" in said


def test_real_pynvml_without_driver_degrades(monkeypatch):
    """With nvidia-ml-py installed but no driver (as on this machine): no exception."""
    pytest.importorskip("pynvml")
    inv = NvmlReader().inventory()
    if inv.gpus:
        pytest.skip("a real NVIDIA driver is present")
    assert len(inv.errors) == 1 and inv.errors[0].startswith("NVML: init failed")


def test_factory_source_never_raises_without_nvml(tmp_path):
    src = make_real_source("nvml", tmp_path, proc_root=tmp_path)
    inv = src.inventory()
    assert inv.gpus == [] and inv.errors and inv.errors[0].startswith("NVML")
    reading = src.read(1.0)
    assert reading.gpus == [] and any(e.startswith("NVML") for e in reading.errors)


def test_inventory_and_sample_units():
    lib = fake_nvml(2)
    reader = NvmlReader(lib)
    inv = reader.inventory()
    assert inv.errors == []
    assert (inv.driver_version, inv.cuda_version) == ("590.48.01", "13.1")
    g0 = inv.gpus[0]
    assert (g0.name, g0.uuid, g0.pci_bus_id, g0.memory_mib) == (
        "NVIDIA H100 80GB HBM3", "GPU-00000000", "00000000:01:00.0", 81559)
    assert reader.pci_bus_ids() == {"0000:01:00": 0, "0000:02:00": 1}
    samples, errors = reader.read()
    assert errors == []
    s = samples[1]
    assert s.index == 1 and s.present
    assert (s.power_w, s.power_limit_w, s.energy_j) == (631.95, 700.0, 123456.789)
    assert (s.fb_used_mib, s.fb_total_mib) == (19818, 81559)
    assert (s.temp_c, s.mem_temp_c, s.util_pct, s.mem_util_pct) == (59, 54, 100, 11)
    assert (s.sm_clock_mhz, s.mem_clock_mhz, s.sm_clock_max_mhz) == (1980, 2619, 1980)
    assert s.clock_event_reasons == 0x40 and s.thermal_violation_ns == 5000
    assert (s.pstate, s.pcie_gen, s.pcie_width, s.pcie_replay_total) == ("P0", 5, 16, 9)
    assert s.ecc.sbe_agg == 3 and s.ecc.dbe_vol == 0 and s.ecc.sram_unc_agg == 0
    assert (s.row_remap.uncorrectable, s.row_remap.pending, s.row_remap.failure) == (1, True, False)
    assert (s.nvlink.links_up, s.nvlink.links_total, s.nvlink.replay, s.nvlink.recovery) == (
        17, 18, 2, 1)
    reader.close()
    assert lib.shutdowns == [1]


def test_not_supported_is_absent_and_other_errors_are_reported():
    reader = NvmlReader(fake_nvml(1, unsupported={"nvmlDeviceGetTotalEnergyConsumption"},
                                  failing={"nvmlDeviceGetPcieReplayCounter"}))
    reader.inventory()
    [s], errors = reader.read()
    assert s.energy_j is None and s.pcie_replay_total is None and s.power_w == 631.95
    assert errors == ["gpu0: nvmlDeviceGetPcieReplayCounter: Unknown Error"]


def test_gpu_lost_after_inventory_is_reported_not_present():
    lost: set[int] = set()
    lib = fake_nvml(2, lost=lost)
    reader = NvmlReader(lib)
    reader.inventory()
    lost.add(1)
    samples, errors = reader.read()
    assert [(s.index, s.present) for s in samples] == [(0, True), (1, False)]
    assert errors == ["gpu1 (00000000:02:00.0): GPU is lost"]


def test_a_gpu_whose_every_query_fails_is_lost_whatever_the_error():
    """A GPU off the bus often answers Unknown Error, not GPU_IS_LOST: it read present with
    every field empty, no G1, and 24 error lines (a real-node audit). One failing query is an
    absent field, not a lost GPU."""
    failing = {"none yet"}
    reader = NvmlReader(fake_nvml(2, failing=failing))
    reader.inventory()
    failing.add("nvmlDeviceGetUtilizationRates")
    samples, errors = reader.read()
    assert [s.present for s in samples] == [True, True]
    assert samples[0].util_pct is None and samples[0].temp_c is not None
    failing.update({"nvmlDeviceGetMemoryInfo", "nvmlDeviceGetTemperature",
                    "nvmlDeviceGetPowerUsage"})
    samples, errors = reader.read()
    assert [s.present for s in samples] == [False, False]
    assert errors[0] == ("gpu0 (00000000:01:00.0): every query fails (Unknown Error): fell off "
                         "the bus?")
    assert len(errors) == 2


def test_a_gpu_lost_before_the_agent_started_is_still_expected(tmp_path):
    """NVML counts 3 GPUs, one of which answers nothing: the birth held 2 and the node read
    "2/2" ok (a real-node audit). The driver's count is what the node expects; G1 names the
    lost one by its index."""
    from fleetdeck.agents.real.source import RealSource

    reader = NvmlReader(fake_nvml(3, lost={1}))
    src = RealSource("nvml", gpu=reader)
    inv = src.inventory()
    assert [g.index for g in inv.gpus] == [0, 2]
    assert inv.gpus_expected == 3
    told = RealSource("nvml", gpu=NvmlReader(fake_nvml(3, lost={1})), gpus_expected=8)
    assert told.inventory().gpus_expected == 8
    whole = RealSource("nvml", gpu=NvmlReader(fake_nvml(3)))
    assert whole.inventory().gpus_expected == 0  # as many as found
