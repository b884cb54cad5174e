"""nvidia-smi CSV parser against real H100 / H200 captures (tests/real/data, MIT, see README)."""

import subprocess

import pytest

from fleetdeck.agents.real.nvsmi import (
    QUERY_FIELDS,
    NvsmiReader,
    gpu_inventory,
    gpu_sample,
    parse_csv,
    parse_cuda_version,
)
from fleetdeck.protocol.fast import GpuSample
from fleetdeck.protocol.messages import GpuInventory

from .conftest import DATA

CAPTURES = [
    "h100-80gb-hbm3__590.48.01__idle",
    "h100-80gb-hbm3__590.48.01__load",
    "h200__590.48.01__idle",
    "h200__590.48.01__load",
]


def fields_tsv(capture: str) -> dict[str, str]:
    """The capture's transposed CSV: header (with its unit, e.g. ``power.draw [W]``) -> value."""
    lines = (DATA / f"{capture}__query-gpu.fields.tsv").read_text().splitlines()[1:]
    return dict(line.split("\t", 1) for line in lines)


def num(text: str) -> float:
    return float(text.split(maxsplit=1)[0])


@pytest.mark.parametrize("capture", CAPTURES)
def test_query_gpu_capture_values(capture):
    table = parse_csv((DATA / f"{capture}__query-gpu.csv").read_text())
    [row] = table.rows
    tsv = fields_tsv(capture)
    errors: list[str] = []
    s = gpu_sample(row, errors)
    assert errors == []
    assert s is not None
    assert s.index == int(tsv["index"])
    assert s.power_w == num(tsv["power.draw [W]"])
    assert s.power_limit_w == num(tsv["power.limit [W]"])
    assert s.temp_c == num(tsv["temperature.gpu"])
    assert s.mem_temp_c == num(tsv["temperature.memory"])
    assert s.sm_clock_mhz == num(tsv["clocks.current.sm [MHz]"])
    assert s.mem_clock_mhz == num(tsv["clocks.current.memory [MHz]"])
    assert s.sm_clock_max_mhz == num(tsv["clocks.max.sm [MHz]"])
    assert s.fb_used_mib == int(num(tsv["memory.used [MiB]"]))
    assert s.fb_total_mib == int(num(tsv["memory.total [MiB]"]))
    assert s.util_pct == num(tsv["utilization.gpu [%]"])
    assert s.mem_util_pct == num(tsv["utilization.memory [%]"])
    assert s.clock_event_reasons == int(tsv["clocks_event_reasons.active"], 16)
    assert s.pstate == tsv["pstate"]
    assert s.pcie_gen == int(tsv["pcie.link.gen.current"])
    assert s.pcie_width == int(tsv["pcie.link.width.current"])
    assert s.ecc.dbe_vol == int(tsv["ecc.errors.uncorrected.volatile.total"])
    assert s.ecc.sbe_agg == int(tsv["ecc.errors.corrected.aggregate.total"])
    assert s.ecc.sram_unc_agg == int(tsv["ecc.errors.uncorrected.aggregate.sram"])
    assert s.row_remap.pending is (tsv["remapped_rows.pending"] == "Yes")
    assert s.row_remap.failure is (tsv["remapped_rows.failure"] == "Yes")
    assert s.row_remap.uncorrectable == int(tsv["remapped_rows.uncorrectable"])
    thermal_us = (num(tsv["clocks_event_reasons_counters.sw_thermal_slowdown [us]"])
                  + num(tsv["clocks_event_reasons_counters.hw_thermal_slowdown [us]"]))
    assert s.thermal_violation_ns == thermal_us * 1000
    # Not in --query-gpu: left absent, never zero.
    assert s.energy_j is None and s.pcie_replay_total is None and s.nvlink.links_up is None

    inv = gpu_inventory(row, errors)
    assert inv is not None
    assert (inv.name, inv.uuid, inv.pci_bus_id) == (tsv["name"], tsv["uuid"], tsv["pci.bus_id"])
    assert inv.memory_mib == int(num(tsv["memory.total [MiB]"]))


def test_headline_values_from_the_reference_readme():
    """Spot checks against the table in the captures' README (TELEMETRY.md §5)."""
    def sample(capture: str) -> tuple[GpuSample, GpuInventory]:
        [row] = parse_csv((DATA / f"{capture}__query-gpu.csv").read_text()).rows
        s, inv = gpu_sample(row, []), gpu_inventory(row, [])
        assert s is not None and inv is not None
        return s, inv

    h100, h100_inv = sample("h100-80gb-hbm3__590.48.01__load")
    assert (h100.power_w, h100.power_limit_w) == (631.95, 700.0)
    assert (h100.temp_c, h100.mem_temp_c) == (59, 54)
    assert (h100.sm_clock_mhz, h100.mem_clock_mhz) == (1980, 2619)
    assert (h100.util_pct, h100.mem_util_pct) == (100, 11)
    assert h100.clock_event_reasons == 0
    assert h100_inv.memory_mib == 81559 and h100_inv.name == "NVIDIA H100 80GB HBM3"
    idle, _ = sample("h100-80gb-hbm3__590.48.01__idle")
    assert (idle.power_w, idle.temp_c, idle.sm_clock_mhz) == (69.85, 41, 345)
    assert idle.clock_event_reasons == 0x1  # GpuIdle
    h200, h200_inv = sample("h200__590.48.01__load")
    assert (h200.power_w, h200.temp_c, h200.mem_temp_c) == (627.40, 52, 40)
    assert h200.mem_clock_mhz == 3201 and h200_inv.memory_mib == 143771


def test_cuda_version_from_nvidia_smi_q():
    text = (DATA / "h100-80gb-hbm3__590.48.01__load__query-q.txt").read_text()
    assert parse_cuda_version(text) == "13.1"
    assert parse_cuda_version("| NVIDIA-SMI 590.48.01   Driver Version: 590.48.01   "
                              "CUDA Version: 13.1     |") == "13.1"
    assert parse_cuda_version("nothing here") is None


def test_absent_values_and_failures():
    text = (
        "index, uuid, pci.bus_id, temperature.gpu, temperature.memory, power.draw [W], "
        "fan.speed [%], utilization.gpu [%], ecc.errors.uncorrected.volatile.total\n"
        "0, GPU-a, 00000000:2B:00.0, 40, [N/A], Not Supported, [Not Supported], 5 %, 0\n"
        "1, GPU-b, 00000000:3B:00.0, [GPU is lost], N/A, 71.20 W, [N/A], 7 %, [Unknown Error]\n"
    )
    table = parse_csv(text)
    assert len(table.rows) == 2
    assert any("[GPU is lost]" in e for e in table.errors)
    errors: list[str] = []
    s0 = gpu_sample(table.rows[0], errors)
    s1 = gpu_sample(table.rows[1], errors)
    assert s0 is not None and s1 is not None
    assert s0.temp_c == 40 and s0.mem_temp_c is None and s0.power_w is None and s0.util_pct == 5
    assert s1.temp_c is None and s1.power_w == 71.2 and s1.ecc.dbe_vol is None
    assert errors == []


def test_nounits_format_and_alias_header():
    table = parse_csv("index, clocks_throttle_reasons.active, power.draw\n0, 0x04, 300.5\n")
    s = gpu_sample(table.rows[0], [])
    assert s is not None
    assert s.clock_event_reasons == 4 and s.power_w == 300.5


def test_out_of_range_value_drops_the_field_not_the_gpu():
    table = parse_csv("index, temperature.gpu, power.draw [W]\n0, 9999, 100.00 W\n")
    errors: list[str] = []
    s = gpu_sample(table.rows[0], errors)
    assert s is not None
    assert s.temp_c is None and s.power_w == 100.0
    assert any("temp_c" in e for e in errors)


# --- the reader, with nvidia-smi replaced by captured output ------------------------------------


def eight_gpu_csv(lost: int | None = None) -> str:
    """The real H100 load row, repeated as 8 GPUs with their own index / uuid / bus id."""
    header, row = (DATA / "h100-80gb-hbm3__590.48.01__load__query-gpu.csv").read_text().splitlines()
    names = [h.split(" [")[0].strip() for h in header.split(", ")]
    values = row.split(", ")
    out = [header]
    shown = 0
    for g in range(8):
        if g == lost:
            out.append(f"Unable to determine the device handle for GPU0000:{g + 1:02X}:00.0: "
                       "Unknown Error")
            continue
        v = list(values)
        # nvidia-smi renumbers the GPUs that remain after one falls off the bus.
        v[names.index("index")] = str(shown)
        v[names.index("uuid")] = f"GPU-{g:08d}-0000-0000-0000-000000000000"
        v[names.index("pci.bus_id")] = f"00000000:{g + 1:02X}:00.0"
        out.append(", ".join(v))
        shown += 1
    return "\n".join(out) + "\n"


class FakeSmi:
    def __init__(self, stdout: str, rc: int = 0) -> None:
        self.stdout, self.rc = stdout, rc
        self.calls: list[list[str]] = []

    def __call__(self, argv, timeout_s):
        self.calls.append(list(argv))
        if len(argv) == 1:
            return subprocess.CompletedProcess(argv, 0, "CUDA Version: 13.1\n", "")
        return subprocess.CompletedProcess(argv, self.rc, self.stdout, "")


def test_reader_inventory_and_read():
    fake = FakeSmi(eight_gpu_csv())
    reader = NvsmiReader(runner=fake)
    inv = reader.inventory()
    assert inv.errors == []
    assert [g.index for g in inv.gpus] == list(range(8))
    assert inv.driver_version == "590.48.01" and inv.cuda_version == "13.1"
    assert fake.calls[0][1] == f"--query-gpu={','.join(QUERY_FIELDS)}"
    assert fake.calls[0][2] == "--format=csv"
    samples, errors = reader.read()
    assert errors == [] and len(samples) == 8 and all(s.present for s in samples)


def test_gpu_off_the_bus_keeps_inventory_indices():
    reader = NvsmiReader(runner=FakeSmi(eight_gpu_csv()))
    reader.inventory()
    reader.runner = FakeSmi(eight_gpu_csv(lost=3), rc=15)
    samples, errors = reader.read()
    assert [s.index for s in samples] == list(range(8))
    assert [s.index for s in samples if not s.present] == [3]
    assert samples[4].present and samples[4].power_w == 631.95  # old GPU 4, printed as index 3
    assert any("gpu3" in e and "missing" in e for e in errors)
    # Its own words, not the CSV header printed before them (a real-node audit).
    (exited,) = [e for e in errors if "exited 15" in e]
    assert "Unable to determine the device handle for GPU0000:04:00.0" in exited, exited


def test_unknown_fields_are_dropped_and_retried():
    calls = []

    def runner(argv, timeout_s):
        calls.append(argv)
        if "pstate" in argv[1]:
            return subprocess.CompletedProcess(
                argv, 2, 'Field "pstate" is not a valid field to query.\n\n', "")
        return subprocess.CompletedProcess(argv, 0, "index, power.draw [W]\n0, 80.00 W\n", "")

    reader = NvsmiReader(runner=runner)
    samples, errors = reader.read()
    assert samples[0].power_w == 80.0
    assert "pstate" not in reader.fields
    assert any("dropped unsupported fields pstate" in e for e in errors)


def test_missing_binary_degrades():
    reader = NvsmiReader(binary="/nonexistent/nvidia-smi")
    inv = reader.inventory()
    assert inv.gpus == []
    assert inv.errors == ["/nonexistent/nvidia-smi: not found (NVIDIA driver utilities not "
                          "installed?)"]
    samples, errors = reader.read()
    assert samples == [] and len(errors) == 1


def test_timeout_is_an_error():
    def runner(argv, timeout_s):
        raise subprocess.TimeoutExpired(argv, timeout_s)

    samples, errors = NvsmiReader(runner=runner, timeout_s=2).read()
    assert samples == [] and errors == [
        "nvidia-smi: no answer within 2 s (driver hung?); asked again every 60 s"]


def test_a_version_mismatch_is_one_error_not_a_row_without_an_index():
    """nvidia-smi exits 18 with two lines of its own in place of the CSV (a driver upgraded
    without a reboot): they read as a header and a row, and the agent added "nvidia-smi row
    without an index: None" beside the exit line (a real-node drill)."""
    said = ("Failed to initialize NVML: Driver/library version mismatch\n"
            "NVML library version: 590.48\n")
    reader = NvsmiReader(runner=FakeSmi(said, rc=18))
    inv = reader.inventory()
    assert inv.gpus == []
    assert inv.errors == ["nvidia-smi exited 18: Failed to initialize NVML: Driver/library "
                          "version mismatch"]
    samples, errors = reader.read()
    assert samples == [] and errors == inv.errors


def test_a_hung_nvidia_smi_is_not_waited_for_at_every_sample():
    """Each sample waited the whole timeout for a hung nvidia-smi: the agent, sampling every
    2 s, published every 10 s and the console read the node stale, failed, stale… (a
    real-node audit). Asked again a minute later; meanwhile its GPUs read lost at once."""
    smi = FakeSmi(eight_gpu_csv())
    now = [0.0]
    reader = NvsmiReader(runner=smi, clock=lambda: now[0])
    reader.inventory()
    hung = [0]

    def runner(argv, timeout_s):
        hung[0] += 1
        raise subprocess.TimeoutExpired(argv, timeout_s)

    reader.runner = runner
    said = "nvidia-smi: no answer within 10 s (driver hung?); asked again every 60 s"
    for _ in range(5):
        samples, errors = reader.read()
        now[0] += 2
        assert errors[0] == said and not any(s.present for s in samples) and len(samples) == 8
    assert hung[0] == 1
    now[0] += 60
    reader.runner = smi  # it answers again
    samples, errors = reader.read()
    assert errors == [] and all(s.present for s in samples)


def test_a_gpu_lost_before_the_agent_started_keeps_its_index_and_is_expected():
    """nvidia-smi renumbers the GPUs that answer: with gpu3 lost at start the birth held 0-6,
    the node read 7/7 ok, and told to expect 8 the console named gpu7 missing (a real-node
    drill). Indexed by PCI bus order over the lost one too, gpu3 is the one missing."""
    from fleetdeck.agents.real.source import RealSource

    reader = NvsmiReader(runner=FakeSmi(eight_gpu_csv(lost=3), rc=15))
    inv = reader.inventory()
    assert [g.index for g in inv.gpus] == [0, 1, 2, 4, 5, 6, 7]
    assert inv.devices == 8
    samples, _errors = reader.read()
    assert [s.index for s in samples if s.present] == [0, 1, 2, 4, 5, 6, 7]
    assert samples[3].power_w == 631.95  # the GPU at bus 05 (printed as index 3) is gpu4
    source = RealSource("nvsmi", gpu=NvsmiReader(runner=FakeSmi(eight_gpu_csv(lost=3), rc=15)))
    assert source.inventory().gpus_expected == 8


def test_a_gpu_whose_every_core_value_failed_is_lost():
    """nvidia-smi answers ``[GPU requires reset]`` (or ``[Unknown Error]``) for every value of
    a GPU gone bad: it was reported present with no figure at all, and its node read ok (a
    real-node audit). Lost, as NVML's reader judges it; a GPU whose values are only ``[N/A]``
    is not."""
    header, *rows = eight_gpu_csv().splitlines()
    names = [h.split(" [")[0].strip() for h in header.split(", ")]
    keep = {"index", "uuid", "name", "pci.bus_id"}
    bad = [v if n in keep else "[GPU requires reset]"
           for n, v in zip(names, rows[2].split(", "), strict=True)]
    na = [v if n in keep else "[N/A]" for n, v in zip(names, rows[5].split(", "), strict=True)]
    smi = FakeSmi(eight_gpu_csv())
    reader = NvsmiReader(runner=smi)
    reader.inventory()
    rows[2], rows[5] = ", ".join(bad), ", ".join(na)
    smi.stdout = "\n".join([header, *rows]) + "\n"
    samples, errors = reader.read()
    assert [s.index for s in samples if not s.present] == [2]
    assert samples[5].present and samples[5].power_w is None
    assert "gpu2 (00000000:03:00.0): every core value failed: lost" in errors


def test_an_inventory_while_nvidia_smi_hangs_keeps_the_mapping():
    """An inventory taken while nvidia-smi hung (the reconnect's birth), or during the minute
    it is not asked again, cleared the reader's UUID/bus mapping: the rows after it came back
    under nvidia-smi's own renumbered indices, gpu3's slot read the GPU at bus 05 and gpu7 was
    gone (docs/real-nodes.md, "What happens when hardware is missing")."""
    smi = FakeSmi(eight_gpu_csv())
    now = [0.0]
    reader = NvsmiReader(runner=smi, clock=lambda: now[0])
    assert len(reader.inventory().gpus) == 8

    def hung(argv, timeout_s):
        raise subprocess.TimeoutExpired(argv, timeout_s)

    reader.runner = hung
    assert reader.inventory().gpus == []  # timed out
    now[0] += 30
    assert reader.inventory().gpus == []  # skipped by the back-off
    now[0] += 31
    reader.runner = FakeSmi(eight_gpu_csv(lost=3), rc=15)
    samples, _errors = reader.read()
    assert [s.index for s in samples] == list(range(8))
    assert [s.index for s in samples if not s.present] == [3]
    assert samples[4].power_w == 631.95  # bus 05, printed as index 3, is still gpu4


def test_a_gpu_keeps_its_index_across_inventories_when_nvidia_smi_renumbers():
    """gpu3 vanishes with no "Unable to determine the device handle" line: nvidia-smi numbers
    the rest 0-6. Taken again at a reconnect, the inventory gave bus 05 (gpu4) index 3, and
    the reader's own lines named the wrong GPU ("gpu3 … every core value failed" for gpu4)."""
    smi = FakeSmi(eight_gpu_csv())
    reader = NvsmiReader(runner=smi)
    first = {g.index: g.pci_bus_id for g in reader.inventory().gpus}
    header, *rows = (ln for ln in eight_gpu_csv(lost=3).splitlines() if not ln.startswith("Unable"))
    smi.stdout = "\n".join([header, *rows]) + "\n"
    again = {g.index: g.pci_bus_id for g in reader.inventory().gpus}
    assert again == {i: b for i, b in first.items() if i != 3}
    names = [h.split(" [")[0].strip() for h in header.split(", ")]
    keep = {"index", "uuid", "name", "pci.bus_id"}
    rows[3] = ", ".join(v if n in keep else "[GPU requires reset]"
                        for n, v in zip(names, rows[3].split(", "), strict=True))
    smi.stdout = "\n".join([header, *rows]) + "\n"
    samples, errors = reader.read()
    assert [(s.index, s.present) for s in samples] == [
        (0, True), (1, True), (2, True), (4, False), (5, True), (6, True), (7, True)]
    assert "gpu4 (00000000:05:00.0): every core value failed: lost" in errors


def test_a_failed_value_names_its_gpu_not_its_csv_row():
    """A value nvidia-smi failed (``[GPU requires reset]``, ``[Unknown Error]``) is said of
    the GPU that failed it, by the agent's index and bus id. It was said of ``row N``, the
    CSV row counted from 1: gpu2's failure read "row 3", the next GPU's number, and after a
    renumbering neither (a real-node audit on the H100 capture)."""
    header, *rows = eight_gpu_csv().splitlines()
    names = [h.split(" [")[0].strip() for h in header.split(", ")]

    def failing(row: str, column: str, value: str) -> str:
        return ", ".join(value if n == column else v
                         for n, v in zip(names, row.split(", "), strict=True))

    smi = FakeSmi(eight_gpu_csv())
    reader = NvsmiReader(runner=smi)
    reader.inventory()
    rows[2] = failing(rows[2], "memory.used", "[GPU requires reset]")
    smi.stdout = "\n".join([header, *rows]) + "\n"
    errors = reader.read()[1]
    assert errors == ["gpu2 (00000000:03:00.0) memory.used: [GPU requires reset]"]
    # gpu3 gone without a word: nvidia-smi numbers bus 06 (gpu5) as its index 4.
    header, *rows = (ln for ln in eight_gpu_csv(lost=3).splitlines() if not ln.startswith("Unable"))
    rows[4] = failing(rows[4], "ecc.errors.uncorrected.volatile.total", "[Unknown Error]")
    smi.stdout = "\n".join([header, *rows]) + "\n"
    errors = reader.read()[1]
    assert ("gpu5 (00000000:06:00.0) ecc.errors.uncorrected.volatile.total: [Unknown Error]"
            in errors), errors
