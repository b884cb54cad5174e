"""InfiniBand sysfs reader: node_exporter and procfs fixtures, and synthetic NDR ports."""

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from fleetdeck.agents.real.sysfs_ib import (
    GBPS_TO_BYTES_PER_S,
    IbDeviceRead,
    IbPortRead,
    IbReader,
    counter_delta,
    parse_hex,
    parse_rate,
    parse_state,
    read_devices,
)
from fleetdeck.protocol.fast import IbPortSample
from fleetdeck.protocol.messages import Severity

from .conftest import DATA, extract_ttar

# --- parsing -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("4: ACTIVE", ("ACTIVE", 4)),
    ("1: DOWN\n", ("DOWN", 1)),
    ("5: ACTIVE_DEFER", ("ACTIVE_DEFER", 5)),
    ("5: LinkUp", ("LinkUp", 5)),
    ("4: PortConfigurationTraining", ("PortConfigurationTraining", 4)),
    ("7: Phy Test", ("Phy Test", 7)),
])
def test_parse_state(text, expected):
    assert parse_state(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("400 Gb/sec (4X NDR)", (400.0, "4X NDR")),
    ("200 Gb/sec (2X NDR)\n", (200.0, "2X NDR")),
    ("100 Gb/sec (4X EDR)", (100.0, "4X EDR")),
    ("10 Gb/sec (4X)", (10.0, "4X")),
    ("2.5 Gb/sec (1X SDR)", (2.5, "1X SDR")),
    ("56 Gb/sec", (56.0, None)),
])
def test_parse_rate(text, expected):
    assert parse_rate(text) == expected


@pytest.mark.parametrize("bad", ["", "fast", "Gb/sec (4X)"])
def test_parse_rate_rejects_garbage(bad):
    with pytest.raises(ValueError):
        parse_rate(bad)


def test_parse_state_rejects_garbage():
    with pytest.raises(ValueError):
        parse_state("ACTIVE")


def test_parse_hex():
    assert parse_hex("0x1a\n") == 26
    assert parse_hex("0x0") == 0


def test_counter_delta():
    assert counter_delta(10, 25) == 15
    assert counter_delta(2**64 - 100, 50, 2**64) == 150  # wrap of a 64-bit data counter
    assert counter_delta(1_000_000, 10, 2**64) == 10  # reset, not a wrap
    assert counter_delta(0xFFFF, 3) == 3  # saturating error counter cleared


# --- node_exporter end-to-end expectations ------------------------------------------------------

_PROM_RE = re.compile(r"^(?P<name>node_infiniband_\w+)\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_LABEL_RE = re.compile(r'(\w+)="([^"]*)"')

Getter = Callable[[IbDeviceRead, IbPortRead, IbPortSample], float | int | None]


def _raw(name: str, scale: int = 1) -> Getter:
    def get(_d: IbDeviceRead, p: IbPortRead, _s: IbPortSample) -> int | None:
        v = p.counters.get(name)
        return None if v is None else v * scale
    return get


def _ext(name: str, scale: int = 1) -> Getter:
    def get(_d: IbDeviceRead, p: IbPortRead, _s: IbPortSample) -> int | None:
        v = p.counters_ext.get(name)
        return None if v is None else v * scale
    return get


def _field(name: str) -> Getter:
    return lambda _d, _p, s: getattr(s, name)


# Every per-port node_infiniband_* metric -> where fleetdeck reports the same quantity, in the
# same unit. Data counters are 4-byte words in sysfs: node_exporter and fleetdeck both report bytes.
# fleetdeck's are the 64-bit counters_ext/ copy where there is one (node_exporter's "legacy"),
# not the 32-bit counters/ that stops at 2^32-1.
PORT_METRICS: dict[str, Getter] = {
    "node_infiniband_port_data_received_bytes_total": _raw("port_rcv_data", 4),
    "node_infiniband_port_data_transmitted_bytes_total": _raw("port_xmit_data", 4),
    "node_infiniband_port_packets_received_total": _raw("port_rcv_packets"),
    "node_infiniband_port_packets_transmitted_total": _raw("port_xmit_packets"),
    "node_infiniband_port_transmit_wait_total": _field("xmit_wait"),
    "node_infiniband_port_discards_transmitted_total": _field("xmit_discards"),
    "node_infiniband_port_discards_received_total": _raw("port_rcv_discards"),
    "node_infiniband_port_errors_received_total": _field("rcv_errors"),
    "node_infiniband_port_constraint_errors_received_total": _raw("port_rcv_constraint_errors"),
    "node_infiniband_port_constraint_errors_transmitted_total":
        _raw("port_xmit_constraint_errors"),
    "node_infiniband_link_downed_total": _field("link_downed"),
    "node_infiniband_link_error_recovery_total": _field("link_error_recovery"),
    "node_infiniband_multicast_packets_received_total": _raw("multicast_rcv_packets"),
    "node_infiniband_multicast_packets_transmitted_total": _raw("multicast_xmit_packets"),
    "node_infiniband_unicast_packets_received_total": _raw("unicast_rcv_packets"),
    "node_infiniband_unicast_packets_transmitted_total": _raw("unicast_xmit_packets"),
    "node_infiniband_legacy_data_received_bytes_total": _field("rcv_bytes_total"),
    "node_infiniband_legacy_data_transmitted_bytes_total": _field("xmit_bytes_total"),
    "node_infiniband_legacy_multicast_packets_received_total": _ext("port_multicast_rcv_packets"),
    "node_infiniband_legacy_multicast_packets_transmitted_total":
        _ext("port_multicast_xmit_packets"),
    "node_infiniband_legacy_packets_received_total": _ext("port_rcv_packets_64"),
    "node_infiniband_legacy_packets_transmitted_total": _ext("port_xmit_packets_64"),
    "node_infiniband_legacy_unicast_packets_received_total": _ext("port_unicast_rcv_packets"),
    "node_infiniband_legacy_unicast_packets_transmitted_total": _ext("port_unicast_xmit_packets"),
    "node_infiniband_physical_state_id": _field("phys_state_id"),
    "node_infiniband_state_id": _field("state_id"),
    "node_infiniband_rate_bytes_per_second":
        lambda _d, _p, s: None if s.rate_gbps is None else s.rate_gbps * GBPS_TO_BYTES_PER_S,
}


def _expected_prom() -> list[tuple[str, dict[str, str], float]]:
    out = []
    for line in (DATA / "node_exporter_e2e_infiniband.prom").read_text().splitlines():
        m = _PROM_RE.match(line)
        if m:
            out.append((m["name"], dict(_LABEL_RE.findall(m["labels"])), float(m["value"])))
    return out


def test_node_exporter_fixture_matches_every_e2e_metric(node_exporter_sys):
    expected = _expected_prom()
    assert len(expected) > 50  # the file is all node_infiniband_* lines of e2e-output.txt
    reader = IbReader(node_exporter_sys / "class" / "infiniband")
    samples, errors = reader.read(now=1000.0)
    devices = {d.name: d for d in reader.devices}
    ports = {(p.dev, p.port): p for d in reader.devices for p in d.ports}
    by_key = {(s.dev, s.port): s for s in samples}
    assert set(by_key) == set(ports)

    seen: set[tuple[str, str, int]] = set()
    for name, labels, value in expected:
        if name == "node_infiniband_info":
            d = devices[labels["device"]]
            assert (d.board_id, d.fw_ver, d.hca_type) == (
                labels["board_id"], labels["firmware_version"], labels["hca_type"])
            assert value == 1
            continue
        assert name in PORT_METRICS, f"unmapped node_exporter metric {name}"
        key = (labels["device"], int(labels["port"]))
        got = PORT_METRICS[name](devices[key[0]], ports[key], by_key[key])
        assert got is not None, f"{name}{labels}: fleetdeck reports nothing, expected {value}"
        assert float(got) == value, f"{name}{labels}: fleetdeck {got} != node_exporter {value}"
        seen.add((name, *key))

    # The converse: nothing that node_exporter skips (``N/A (no PMA)`` on i40iw0, files absent on
    # mlx4_0 port 2) is reported by fleetdeck as a number.
    for name, get in PORT_METRICS.items():
        for key, port in ports.items():
            got = get(devices[key[0]], port, by_key[key])
            assert (got is not None) == ((name, *key) in seen), (name, key, got)

    # N/A counters are "unsupported", not failures.
    assert not any("i40iw0" in e and "counters" in e for e in errors), errors
    assert {d["device"] for _, d, _ in expected if "device" in d} == set(devices)


def test_node_exporter_fixture_sample_fields(node_exporter_sys):
    samples, _ = IbReader(node_exporter_sys / "class" / "infiniband").read(now=1.0)
    by_key = {(s.dev, s.port): s for s in samples}
    i40 = by_key[("i40iw0", 1)]
    assert i40.xmit_bytes_total is None and i40.symbol_error is None  # N/A (no PMA)
    assert (i40.state, i40.phys_state, i40.width) == ("ACTIVE", "LinkUp", "4X")
    mlx = by_key[("mlx4_0", 1)]
    # port_xmit_wait is a saturated 32-bit counter in the fixture: reported as is.
    assert mlx.xmit_wait == 2**32 - 1
    assert mlx.rate_gbps == 40.0 and mlx.width == "4X QDR"
    # mlx4_0 port 2 has no counters/port_rcv_packets: the 64-bit counters_ext copy stands in.
    devices, _ = read_devices(node_exporter_sys / "class" / "infiniband")
    p2 = next(p for d in devices for p in d.ports if (p.dev, p.port) == ("mlx4_0", 2))
    assert by_key[("mlx4_0", 2)].rcv_pkts_total == p2.counters_ext["port_rcv_packets_64"]


# --- procfs fixture (mlx5 with hw_counters) ------------------------------------------------------


def _procfs_rows() -> list[tuple[list[str], str]]:
    rows = []
    for line in (DATA / "procfs_sys_class_infiniband.tsv").read_text().splitlines()[1:]:
        path, kind, value = line.split("\t")
        assert kind == "file"
        rows.append((path.split("/"), value.replace("\\n", "\n")))
    return rows


def test_procfs_fixture_parses(procfs_sys):
    devices, errors = read_devices(procfs_sys / "class" / "infiniband")
    assert errors == []
    devs = {d.name: d for d in devices}
    ports = {(p.dev, p.port): p for d in devices for p in d.ports}
    checked = 0
    for parts, value in _procfs_rows():
        # class/infiniband/<dev>/<attr> or class/infiniband/<dev>/ports/<n>/[<dir>/]<name>
        dev = parts[2]
        if len(parts) == 4:
            assert getattr(devs[dev], parts[3]) == value.strip()
        elif len(parts) == 6:
            port = ports[(dev, int(parts[4]))]
            attr = parts[5]
            if attr in ("state", "phys_state"):
                num, name = value.split(": ")
                assert (getattr(port, attr), getattr(port, f"{attr}_id")) == (name, int(num))
            elif attr == "rate":
                assert port.rate_gbps == float(value.split()[0])
            elif attr == "link_layer":
                assert port.link_layer == value.strip()
        else:
            port = ports[(dev, int(parts[4]))]
            assert getattr(port, parts[5])[parts[6]] == int(value)
        checked += 1
    assert checked == len(_procfs_rows())
    assert devs["mlx5_0"].node_guid == "0a7f:bc12:45ef:d23b"  # the ttar "EOF" (no newline) case


def test_procfs_fixture_samples(procfs_sys):
    samples, errors = IbReader(procfs_sys / "class" / "infiniband").read(now=5.0)
    assert errors == []
    tsv = {"/".join(parts): value for parts, value in _procfs_rows()}
    mlx5 = next(s for s in samples if s.dev == "mlx5_0")
    base = "class/infiniband/mlx5_0/ports/1"
    assert mlx5.rnr_nak_retry_err == int(tsv[f"{base}/hw_counters/rnr_nak_retry_err"])
    assert mlx5.local_ack_timeout_err == int(tsv[f"{base}/hw_counters/local_ack_timeout_err"])
    assert mlx5.xmit_bytes_total == 4 * int(tsv[f"{base}/counters/port_xmit_data"])
    assert mlx5.rcv_pkts_total == int(tsv[f"{base}/counters/port_rcv_packets"])
    # procfs's quirk: mlx5_0 phys_state reads "4: ACTIVE"; reported as sysfs says.
    assert (mlx5.phys_state, mlx5.phys_state_id) == ("ACTIVE", 4)
    hfi = next(s for s in samples if s.dev == "hfi1_0")
    hfi_rcv = tsv["class/infiniband/hfi1_0/ports/1/counters/port_rcv_data"]
    assert hfi.rcv_bytes_total == 4 * int(hfi_rcv)
    assert {(s.dev, s.port) for s in samples} == {("hfi1_0", 1), ("mlx4_0", 1), ("mlx4_0", 2),
                                                   ("mlx5_0", 1)}


# --- synthetic NDR port: rates, deltas, wrap, resets, missing files -----------------------------


def make_port(root: Path, dev: str = "mlx5_ib0", port: int = 1, **files: str) -> Path:
    d = root / dev / "ports" / str(port)
    (d / "counters").mkdir(parents=True, exist_ok=True)
    (d / "hw_counters").mkdir(exist_ok=True)
    defaults = {
        "state": "4: ACTIVE", "phys_state": "5: LinkUp", "rate": "400 Gb/sec (4X NDR)",
        "link_layer": "InfiniBand", "lid": "0x1a", "sm_lid": "0x1",
        "counters/port_xmit_data": "0", "counters/port_rcv_data": "0",
        "counters/port_xmit_packets": "0", "counters/port_rcv_packets": "0",
        "counters/symbol_error": "0", "counters/link_downed": "0",
        "counters/link_error_recovery": "0", "counters/port_xmit_wait": "0",
        "hw_counters/rnr_nak_retry_err": "0",
    }
    for name, value in {**defaults, **files}.items():
        (d / name).write_text(value + "\n")
    (root / dev / "fw_ver").write_text("28.39.1002\n")
    return d


def write(port_dir: Path, **values: int | str) -> None:
    for name, value in values.items():
        sub = "hw_counters" if name in ("rnr_nak_retry_err",) else "counters"
        (port_dir / sub / name).write_text(f"{value}\n")


def test_ndr_port_rates_and_deltas(tmp_path):
    pd = make_port(tmp_path)
    reader = IbReader(tmp_path, expected_rate_gbps=400)
    first, errors = reader.read(now=100.0)
    assert errors == []
    s = first[0]
    assert (s.state, s.state_id, s.phys_state, s.phys_state_id) == ("ACTIVE", 4, "LinkUp", 5)
    assert (s.rate_gbps, s.width, s.lid, s.sm_lid) == (400.0, "4X NDR", 26, 1)
    assert s.xmit_Bps is None and s.d == {}  # no previous read yet
    words = 12_500_000_000 // 4 * 10  # 12.5 GB/s for 10 s, in 4-byte words
    write(pd, port_xmit_data=words, port_rcv_data=words // 2, symbol_error=7, link_downed=1,
          rnr_nak_retry_err=2)
    s = reader.read(now=110.0)[0][0]
    assert s.xmit_Bps == pytest.approx(12.5e9)
    assert s.rcv_Bps == pytest.approx(6.25e9)
    assert s.xmit_bytes_total == words * 4
    assert s.d["symbol_error"] == 7 and s.d["link_downed"] == 1 and s.d["rnr_nak_retry_err"] == 2
    assert s.d["link_error_recovery"] == 0
    inv, inv_errors = reader.inventory()
    assert inv_errors == []
    assert inv[0].dev == "mlx5_ib0" and inv[0].expected_rate_gbps == 400
    assert inv[0].link_layer == "InfiniBand"


def test_data_counter_wrap_and_error_counter_reset(tmp_path):
    pd = make_port(tmp_path)
    write(pd, port_xmit_data=2**64 - 100, symbol_error=500)
    reader = IbReader(tmp_path)
    reader.read(now=0.0)
    write(pd, port_xmit_data=50, symbol_error=3)
    s = reader.read(now=1.0)[0][0]
    assert s.xmit_Bps == 150 * 4  # wrapped through 2^64, not a negative rate
    assert s.d["symbol_error"] == 3  # cleared counter: growth since the clear
    assert s.xmit_bytes_total == 200  # 50 words = 200 bytes


def test_a_saturated_32_bit_data_counter_is_no_idle_port(tmp_path):
    """An old HCA's 32-bit port_xmit_data stops at 2^32-1 (the IBTA's counters saturate): its
    rate read 0, an idle port in the charts, however busy it was. Left out and said, per port;
    the other direction, still counting, keeps its rate."""
    pd = make_port(tmp_path)
    write(pd, port_xmit_data=2**32 - 1)
    reader = IbReader(tmp_path)
    reader.read(now=0.0)
    write(pd, port_rcv_data=1000)
    samples, errors = reader.read(now=1.0)
    s = samples[0]
    assert s.xmit_Bps is None and s.rcv_Bps == 4000
    assert s.xmit_bytes_total == 4 * (2**32 - 1)  # the counter as it reads
    assert errors == ["mlx5_ib0:1: counter saturated: port_xmit_data stuck at 2^32-1 (32-bit, "
                      "no 64-bit counters_ext/): its traffic is not measured, not zero"]
    # Cleared (perfquery -R), it counts again.
    write(pd, port_xmit_data=500)
    samples, errors = reader.read(now=2.0)
    assert samples[0].xmit_Bps == 2000 and errors == []


def test_the_64_bit_counters_ext_copy_is_preferred(tmp_path):
    """mlx4 has both: the 32-bit counters/ (stuck full) and counters_ext/'s 64-bit copy."""
    pd = make_port(tmp_path)
    write(pd, port_xmit_data=2**32 - 1, port_rcv_data=2**32 - 1)
    (pd / "counters_ext").mkdir()
    (pd / "counters_ext" / "port_xmit_data_64").write_text(f"{2**33}\n")
    (pd / "counters_ext" / "port_rcv_data_64").write_text(f"{2**34}\n")
    reader = IbReader(tmp_path)
    reader.read(now=0.0)
    (pd / "counters_ext" / "port_xmit_data_64").write_text(f"{2**33 + 10}\n")
    samples, errors = reader.read(now=1.0)
    s = samples[0]
    assert errors == []
    assert (s.xmit_bytes_total, s.xmit_Bps, s.rcv_Bps) == (4 * (2**33 + 10), 40, 0)


def test_no_rate_across_a_change_between_32_and_64_bit_counters(tmp_path):
    """A counters_ext/ file unread for one sample, the 32-bit counters/ read instead: the two
    reads either side of it are of different counters, no interval. Differenced, 64-bit after
    32-bit read 4.4 TB/s on a quiet port, 32-bit after 64-bit a reset's made-up rate."""
    pd = make_port(tmp_path)
    write(pd, port_xmit_data=1000, port_rcv_data=2**32 - 1)
    (pd / "counters_ext").mkdir()
    ext = pd / "counters_ext" / "port_xmit_data_64"
    ext.write_text(f"{2**40}\n")
    (pd / "counters_ext" / "port_rcv_data_64").write_text(f"{2**40}\n")
    reader = IbReader(tmp_path)
    reader.read(now=0.0)
    ext.unlink()
    s = reader.read(now=1.0)[0][0]
    assert s.xmit_Bps is None and s.rcv_Bps == 0
    write(pd, port_xmit_data=1010)
    s = reader.read(now=2.0)[0][0]
    assert s.xmit_Bps == 40  # the 32-bit counter, read twice, still measures
    ext.write_text(f"{2**40 + 10}\n")
    s = reader.read(now=3.0)[0][0]
    assert s.xmit_Bps is None and s.rcv_Bps == 0
    ext.write_text(f"{2**40 + 20}\n")
    s = reader.read(now=4.0)[0][0]
    assert s.xmit_Bps == 40


def test_a_64_bit_total_unread_once_is_left_out_not_the_32_bit_one(tmp_path):
    """mlx4's counters_ext/ file unread for one sample (a failed PMA query): the total from
    counters/ instead fell from 2^40 words to 1000 and rose back, an exported counter reset and
    a 4 TB spike to Prometheus. Left out that once; gone for good, the 32-bit one is read."""
    pd = make_port(tmp_path)
    write(pd, port_xmit_data=1000, port_xmit_packets=7)
    (pd / "counters_ext").mkdir()
    ext = pd / "counters_ext"
    data, pkts = ext / "port_xmit_data_64", ext / "port_xmit_packets_64"
    data.write_text(f"{2**40}\n")
    pkts.write_text(f"{2**36}\n")
    reader = IbReader(tmp_path)
    s = reader.read(now=0.0)[0][0]
    assert (s.xmit_bytes_total, s.xmit_pkts_total) == (4 * 2**40, 2**36)
    data.unlink()
    pkts.unlink()
    s = reader.read(now=1.0)[0][0]
    assert (s.xmit_bytes_total, s.xmit_pkts_total) == (None, None)
    s = reader.read(now=2.0)[0][0]
    assert (s.xmit_bytes_total, s.xmit_pkts_total) == (4000, 7)
    data.write_text(f"{2**40 + 1}\n")
    s = reader.read(now=3.0)[0][0]
    assert s.xmit_bytes_total == 4 * (2**40 + 1)


def test_data_counter_reset_is_not_a_wrap(tmp_path):
    pd = make_port(tmp_path)
    write(pd, port_rcv_data=1_000_000)
    reader = IbReader(tmp_path)
    reader.read(now=0.0)
    write(pd, port_rcv_data=10)
    s = reader.read(now=2.0)[0][0]
    assert s.rcv_Bps == 10 * 4 / 2


def test_missing_and_unreadable_files_are_tolerated(tmp_path):
    pd = make_port(tmp_path)
    (pd / "rate").unlink()
    (pd / "state").write_text("garbage\n")
    (pd / "counters" / "symbol_error").write_text("lots\n")
    (pd / "lid").unlink()
    samples, errors = IbReader(tmp_path).read(now=0.0)
    s = samples[0]
    assert s.rate_gbps is None and s.state is None and s.symbol_error is None and s.lid is None
    assert s.phys_state == "LinkUp"
    joined = "\n".join(errors)
    assert "rate: missing" in joined
    assert "unparsable state" in joined
    assert "symbol_error: not a counter" in joined
    assert "lid" not in joined  # absent lid is normal (Ethernet ports)


def test_missing_root_is_an_error_not_an_exception(tmp_path):
    samples, errors = IbReader(tmp_path / "nope").read(now=0.0)
    assert samples == []
    assert "missing" in errors[0]


def test_port_state_change_and_vanishing_port_make_events(tmp_path):
    pd = make_port(tmp_path)
    reader = IbReader(tmp_path)
    reader.read(now=0.0)
    assert reader.take_events() == []
    (pd / "state").write_text("1: DOWN\n")
    (pd / "phys_state").write_text("2: Polling\n")
    reader.read(now=1.0)
    [ev] = reader.take_events()
    assert ev.kind == "ib_port_state" and ev.component == "mlx5_ib0:1"
    assert ev.severity is Severity.ERROR
    assert ev.data["state"] == "DOWN" and ev.data["prev_state"] == "ACTIVE"
    # The HCA disappears from sysfs: the port is still reported, with every field absent.
    import shutil
    shutil.rmtree(tmp_path / "mlx5_ib0")
    samples, errors = reader.read(now=2.0)
    assert samples == [IbPortSample(dev="mlx5_ib0", port=1)]
    assert any("no longer present" in e for e in errors)
    [ev] = reader.take_events()
    assert "absent" in ev.message
    reader.read(now=3.0)
    assert reader.take_events() == []  # still absent: no repeat
    make_port(tmp_path)
    s = reader.read(now=4.0)[0][0]
    assert s.state == "ACTIVE" and s.xmit_Bps is None  # no rate across the outage
    [ev] = reader.take_events()
    assert ev.severity is Severity.INFO


def test_netdev_and_pci_address_from_device_link(tmp_path):
    pci = tmp_path / "devices" / "pci0000:00" / "0101:00:00.0"
    (pci / "net" / "ib0").mkdir(parents=True)
    (pci / "net" / "ib0" / "dev_port").write_text("0\n")
    root = tmp_path / "class" / "infiniband"
    make_port(root)
    (root / "mlx5_ib0" / "device").symlink_to(pci)
    reader = IbReader(root)
    inv, _ = reader.inventory()
    assert inv[0].netdev == "ib0"
    assert reader.devices[0].pci_addr == "0101:00:00.0"
    assert reader.netdev_components() == {"ib0": "mlx5_ib0:1"}


def test_extract_ttar_roundtrip(tmp_path):
    files = extract_ttar(DATA / "procfs_sys_class_infiniband.ttar", tmp_path)
    assert len(files) == len(_procfs_rows())
    link_layer = tmp_path / "fixtures/sys/class/infiniband/mlx4_0/ports/2/link_layer"
    assert link_layer.read_text() == "InfiniBand\n\n"


def test_an_ethernet_port_is_no_ib_port(tmp_path):
    """Azure's accelerated-networking mlx5_an0 (Ethernet, 40 Gb/s) on every ND H100 v5 node was
    judged as an IB port: N1 "40 Gb/s, not 400" failed the node, and with an HCA missing it made
    the count read as the SKU's eight (a real-node audit)."""
    for i in range(7):
        make_port(tmp_path, f"mlx5_ib{i}")
    make_port(tmp_path, "mlx5_an0", link_layer="Ethernet", rate="40 Gb/sec (4X QDR)")
    reader = IbReader(tmp_path)
    inventory, errors = reader.inventory()
    assert errors == []
    assert [p.dev for p in inventory] == [f"mlx5_ib{i}" for i in range(7)]
    samples, _ = reader.read(now=1.0)
    assert [s.dev for s in samples] == [f"mlx5_ib{i}" for i in range(7)]
    # A dual-port HCA with one port on Ethernet (VPI): its IB port stays, the other goes.
    make_port(tmp_path, "mlx4_0", port=1)
    make_port(tmp_path, "mlx4_0", port=2, link_layer="Ethernet", rate="40 Gb/sec (4X QDR)")
    assert [(s.dev, s.port) for s in reader.read(now=1.5)[0] if s.dev == "mlx4_0"] == [
        ("mlx4_0", 1)]
    # A port that does not say its link layer (an older kernel) is taken for an IB port.
    (tmp_path / "mlx5_ib0" / "ports" / "1" / "link_layer").unlink()
    assert len(reader.read(now=2.0)[0]) == 8


def test_carrier_losses_are_counted_from_the_netdevs_carrier_down_count(tmp_path):
    """NetworkManager images never log "ibN: lost carrier", so N5 never fired there (a
    real-node audit): the netdev's carrier_down_count says it on every distro. Counted from
    the agent's start (the count since boot holds the driver's own carrier-off at probe), over
    24 h, and a driver reload (the count going back) is no loss."""
    make_port(tmp_path, "mlx5_ib0")
    net = tmp_path / "mlx5_ib0" / "device" / "net" / "ib0"
    net.mkdir(parents=True)
    (net / "dev_port").write_text("0\n")
    (net / "carrier_down_count").write_text("3\n")
    reader = IbReader(tmp_path)
    assert reader.read(now=0.0)[0][0].carrier_losses_24h == 0
    (net / "carrier_down_count").write_text("5\n")
    assert reader.read(now=10.0)[0][0].carrier_losses_24h == 2
    (net / "carrier_down_count").write_text("1\n")  # driver reloaded
    assert reader.read(now=20.0)[0][0].carrier_losses_24h == 2
    (net / "carrier_down_count").write_text("4\n")
    assert reader.read(now=30.0)[0][0].carrier_losses_24h == 5
    assert reader.read(now=86_415.0)[0][0].carrier_losses_24h == 3  # the first two aged out
    # A netdev without the file (an old kernel) reports no count, not 0.
    (net / "carrier_down_count").unlink()
    assert reader.read(now=86_420.0)[0][0].carrier_losses_24h is None


def test_a_port_without_its_counters_directory_says_so(tmp_path):
    """An IB port whose ``counters/`` is missing reads no error counter at all, so N2-N4 are
    blind to it: that is said in the agent's errors, as any missing file is
    (docs/real-nodes.md), not read as a port with nothing to report. ``hw_counters/`` and
    ``counters_ext/`` are the driver's extras: their absence says nothing."""
    pd = make_port(tmp_path)
    reader = IbReader(tmp_path)
    assert reader.read(now=0.0)[1] == []
    shutil.rmtree(pd / "counters")
    shutil.rmtree(pd / "hw_counters")
    samples, errors = reader.read(now=1.0)
    assert samples[0].state == "ACTIVE" and samples[0].symbol_error is None
    assert errors == [f"{pd / 'counters'}: missing"]


def test_an_hca_back_under_a_new_name_is_no_port_gone(tmp_path):
    """An HCA reset registers its device again, and the kernel may name it anew: the port
    reported absent under the old name for good failed the node by N7 ("reseat or replace the
    HCA") with every port up (a real-node drill)."""
    import shutil
    root = tmp_path / "class" / "infiniband"
    for i in (3, 4):
        pci = tmp_path / "devices" / f"010{i}:00:00.0"
        pci.mkdir(parents=True)
        make_port(root, dev=f"mlx5_{i}")
        (root / f"mlx5_{i}" / "device").symlink_to(pci)
    reader = IbReader(root)
    reader.inventory()
    reader.read(now=0.0)
    shutil.move(root / "mlx5_3", tmp_path / "away")
    samples, errors = reader.read(now=1.0)
    assert IbPortSample(dev="mlx5_3", port=1) in samples  # gone, for now
    reader.take_events()
    shutil.move(tmp_path / "away", root / "mlx5_8")
    samples, errors = reader.read(now=2.0)
    assert sorted(s.dev for s in samples) == ["mlx5_4", "mlx5_8"]
    assert not any("mlx5_3" in e for e in errors), errors
    [ev] = reader.take_events()
    assert ev.component == "mlx5_8:1" and "mlx5_3:1: back as mlx5_8:1" in ev.message
    assert reader.renamed  # the birth still names mlx5_3: a new one is owed
    samples, _ = reader.read(now=3.0)
    assert sorted(s.dev for s in samples) == ["mlx5_4", "mlx5_8"]
    inv, _ = reader.inventory()
    assert [p.dev for p in inv] == ["mlx5_4", "mlx5_8"] and not reader.renamed


def _two_hcas(tmp_path: Path) -> Path:
    root = tmp_path / "class" / "infiniband"
    for i in (3, 4):
        pci = tmp_path / "devices" / f"010{i}:00:00.0"
        pci.mkdir(parents=True)
        make_port(root, dev=f"mlx5_{i}")
        (root / f"mlx5_{i}" / "device").symlink_to(pci)
    return root


def test_an_hca_renamed_before_the_first_read_is_no_port_gone(tmp_path):
    """The agent's birth (its inventory) came before its first read, and an HCA reset between
    them: its PCI address was only learnt by a read, so the old name stayed absent for as long
    as the agent ran, N7 "reseat or replace the HCA" with every port up (a review)."""
    root = _two_hcas(tmp_path)
    reader = IbReader(root)
    reader.inventory()
    shutil.move(root / "mlx5_3", root / "mlx5_8")
    samples, errors = reader.read(now=0.0)
    assert sorted(s.dev for s in samples) == ["mlx5_4", "mlx5_8"] and errors == []
    assert reader.renamed


def test_two_hcas_back_under_each_others_names_are_no_burst(tmp_path):
    """Two HCAs reset at once come back under each other's names (the kernel gives the lowest
    free index to whichever registers first). Each name's counters were the other HCA's: the
    one with 100 symbol errors made a burst of 100 on the other's name in one interval, and
    the birth's netdev and GPU pairing of each name were the other's (a review)."""
    root = _two_hcas(tmp_path)
    reader = IbReader(root)
    reader.inventory()
    write(root / "mlx5_3" / "ports" / "1", symbol_error=100)
    reader.read(now=0.0)
    reader.take_events()
    shutil.move(root / "mlx5_3", tmp_path / "away")
    shutil.move(root / "mlx5_4", root / "mlx5_3")
    shutil.move(tmp_path / "away", root / "mlx5_4")
    samples, errors = reader.read(now=1.0)
    assert errors == []
    by_dev = {s.dev: s for s in samples}
    assert by_dev["mlx5_4"].symbol_error == 100
    assert not (by_dev["mlx5_4"].d or {}).get("symbol_error"), by_dev["mlx5_4"].d
    assert reader.renamed  # the birth's names are the same, its HCAs are not
    events = reader.take_events()
    assert sorted(e.component for e in events) == ["mlx5_3:1", "mlx5_4:1"]
    assert "mlx5_4:1: now the HCA at 0103:00:00.0, not 0104:00:00.0" in events[-1].message
    write(root / "mlx5_4" / "ports" / "1", symbol_error=103)
    samples, _ = reader.read(now=2.0)
    assert {s.dev: s for s in samples}["mlx5_4"].d["symbol_error"] == 3
    assert reader.take_events() == []
