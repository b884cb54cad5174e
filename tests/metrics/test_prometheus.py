"""``fleetdeck collect --metrics``: a real Prometheus (Debian's package) scrapes a running
collector of a simulated fleet, and PromQL answers with the fleet's values."""

import asyncio
import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import aiomqtt
import pytest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from fleetdeck.agents.agent import NodeAgent
from fleetdeck.agents.sim.node import SimNode
from fleetdeck.brokerurl import BrokerURL
from fleetdeck.console.metrics import GPU_FIELDS, PORT_COUNTERS, parse_listen
from fleetdeck.errors import UserError
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import GpuSample, IbPortSample
from fleetdeck.protocol.topics import Kind, topic_for
from tests.conftest import run_cli, spawn, stop_process

CLUSTER = "prom"
NODES = 3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def query(prom: int, promql: str) -> list[dict]:
    url = f"http://127.0.0.1:{prom}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=5) as resp:
        body = json.loads(resp.read())
    assert body["status"] == "success", body
    return body["data"]["result"]


def value(prom: int, promql: str) -> float | None:
    result = query(prom, promql)
    return float(result[0]["value"][1]) if result else None


def wait_for(prom: int, promql: str, want: float, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    got = None
    while time.monotonic() < deadline:
        try:
            got = value(prom, promql)
        except OSError:  # Prometheus still starting
            got = None
        if got == want:
            return
        time.sleep(0.5)
    pytest.fail(f"{promql} = {got}, expected {want}")


def start_prometheus(tmp: Path, target: int) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    config = tmp / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: fleetdeck\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{target}']\n")
    exe = shutil.which("prometheus")
    assert exe is not None
    log = (tmp / "prometheus.log").open("wb")
    proc = subprocess.Popen([exe, f"--config.file={config}",
                             f"--storage.tsdb.path={tmp / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return proc, port


@pytest.mark.needs("prometheus")
@pytest.mark.timeout(240)
def test_prometheus_scrapes_the_collector_and_promql_sees_the_fleet(mosquitto, tmp_path):
    url = str(mosquitto.url)
    metrics = free_port()
    sim = spawn("sim", "--broker", url, "--cluster", CLUSTER, "--nodes", str(NODES), "--jobs",
                "0", "--seed", "3", log=tmp_path / "sim.log")
    col = spawn("collect", "--broker", url, "--cluster", CLUSTER, "--db", str(tmp_path / "c.db"),
                "--metrics", f"127.0.0.1:{metrics}", log=tmp_path / "collect.log")
    prom, prom_port = start_prometheus(tmp_path, metrics)
    try:
        wait_for(prom_port, f'sum(fleetdeck_node_verdict{{cluster="{CLUSTER}",verdict="ok"}})',
                 NODES)
        wait_for(prom_port, f'count(DCGM_FI_DEV_GPU_TEMP{{cluster="{CLUSTER}"}})', NODES * 8)
        wait_for(prom_port, 'count(node_infiniband_state_id{node="gpu0002"} == 4)', 8)
        assert value(prom_port, 'fleetdeck_gpu_present{node="gpu0001",gpu="3"}') == 1.0
        rate = value(prom_port, 'node_infiniband_rate_bytes_per_second'
                     '{node="gpu0001",device="mlx5_ib0"}')
        assert rate == 400e9 / 8  # NDR: 400 Gb/s
        temps = query(prom_port, 'DCGM_FI_DEV_GPU_TEMP{node="gpu0003"}')
        assert all(20 <= float(r["value"][1]) <= 100 for r in temps)
        assert {r["metric"]["gpu"] for r in temps} == {str(i) for i in range(8)}
        # A GPU falls off the bus: the verdict and the GPU's presence change in Prometheus.
        deadline = time.monotonic() + 30
        while True:
            res = run_cli("inject", "--broker", url, "--cluster", CLUSTER, "xid79",
                          "node=gpu0002", "gpu=5", "--wait", "2")
            if res.returncode == 0 or time.monotonic() > deadline:
                break
        assert res.returncode == 0, res.stderr
        wait_for(prom_port, 'fleetdeck_node_verdict{node="gpu0002",verdict="failed"}', 1.0)
        wait_for(prom_port, 'fleetdeck_gpu_present{node="gpu0002",gpu="5"}', 0.0)
        assert value(prom_port, f'fleetdeck_nodes{{cluster="{CLUSTER}",verdict="failed"}}') \
            == 1.0
        assert value(prom_port, 'fleetdeck_messages_received_total') > 0
    finally:
        prom.terminate()
        prom.wait(10)
        assert stop_process(col) == 0
        stop_process(sim)


def test_every_exported_field_is_a_field_of_the_protocol():
    for _name, _doc, attr, _scale in GPU_FIELDS:
        assert attr in GpuSample.model_fields, attr
    for _name, _doc, attr in PORT_COUNTERS:
        assert attr in IbPortSample.model_fields, attr


@pytest.mark.parametrize("text, want", [("9108", ("127.0.0.1", 9108)),
                                        (":9108", ("0.0.0.0", 9108)),
                                        ("10.0.0.5:9108", ("10.0.0.5", 9108))])
def test_listen_address_forms(text, want):
    assert parse_listen(text) == want


def test_a_bad_metrics_address_is_one_sentence(tmp_path):
    with pytest.raises(UserError, match="is not HOST:PORT"):
        parse_listen("localhost:http")
    res = run_cli("collect", "--broker", "mqtt://127.0.0.1:1", "--cluster", "x", "--db",
                  str(tmp_path / "x.db"), "--metrics", "nope:http")
    assert res.returncode == 2 and "is not HOST:PORT" in res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("text", [":99999", "99999", "10.0.0.5:-1"])
def test_a_metrics_port_out_of_range_says_so(text):
    """":99999" read "is not HOST:PORT, :PORT or PORT", which it is, but for the number."""
    port = text.rpartition(":")[2]
    with pytest.raises(UserError) as err:
        parse_listen(text)
    assert str(err.value) == f"--metrics '{text}': port {port} is out of range (0 to 65535)."


def test_a_collector_on_ipv6_loopback_prints_a_metrics_url_that_scrapes(mosquitto, tmp_path):
    """``--metrics [::1]:PORT`` printed ``http://::1:PORT/metrics``: no scraper can use it."""
    with socket.socket(socket.AF_INET6) as s:
        s.bind(("::1", 0))
        port = s.getsockname()[1]
    log = tmp_path / "collect.log"
    col = spawn("collect", "--broker", str(mosquitto.url), "--cluster", CLUSTER, "--db",
                str(tmp_path / "c.db"), "--metrics", f"[::1]:{port}", log=log)
    try:
        deadline = time.monotonic() + 30
        while "Prometheus metrics on" not in log.read_text():
            assert col.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        (line,) = [x for x in log.read_text().splitlines() if "Prometheus metrics on" in x]
        url = line.rsplit(" ", 1)[1]
        assert url == f"http://[::1]:{port}/metrics", line
        with urllib.request.urlopen(url, timeout=10) as resp:
            assert resp.status == 200 and b"fleetdeck_broker_connected" in resp.read()
    finally:
        stop_process(col)


def test_a_metrics_port_in_use_ends_the_collector(mosquitto, tmp_path):
    """It said so and then slept for ever (its store's writer thread kept it alive): under
    systemd, a running service that collects nothing."""
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        res = run_cli("collect", "--broker", str(mosquitto.url), "--cluster", "x", "--db",
                      str(tmp_path / "x.db"), "--metrics", f"127.0.0.1:{port}", timeout=30)
    finally:
        taken.close()
    assert res.returncode == 2, res.stderr
    assert "cannot serve metrics" in res.stderr and "Traceback" not in res.stderr


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def scrape(port: int) -> dict[str, Metric]:
    status, text = get(port, "/metrics")
    assert status == 200
    families = {f.name: f for f in text_string_to_metric_families(text)}
    # Valid exposition: every family announces its HELP and TYPE.
    for name in families:
        assert f"# HELP {name}" in text and f"# TYPE {name}" in text, name
    return families


def sample(families: dict[str, Metric], name: str, **labels: str) -> float | None:
    for s in families[name].samples:
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    return None


async def publish_retained(url: BrokerURL, topic: str, payload: bytes) -> None:
    async with aiomqtt.Client(url.host, url.port) as client:
        await client.publish(topic, payload, qos=1, retain=True)


def test_the_metrics_endpoint_routes_and_tells_broker_and_waiting(mosquitto, tmp_path):
    """Only /metrics is the exposition (/ points to it, anything else is 404: it answered every
    path with 200); the broker connection and the time since the last message are gauges; a
    node born but not heard yet counts as waiting, not ok."""
    url = str(mosquitto.url)
    port = free_port()
    col = spawn("collect", "--broker", url, "--cluster", CLUSTER, "--db", str(tmp_path / "c.db"),
                "--metrics", f"127.0.0.1:{port}", log=tmp_path / "collect.log")
    # A node that announced itself and has sent nothing yet (at a 60 s interval: waiting for
    # three of them).
    quiet = NodeAgent(cluster=CLUSTER, node_id="gpu0042", source=SimNode("gpu0042"),
                      url=BrokerURL("127.0.0.1", 1), interval_s=60.0)
    quiet.bd_seq = quiet._next_bd_seq()
    asyncio.run(publish_retained(mosquitto.url, topic_for(CLUSTER, Kind.BIRTH, "gpu0042"),
                                 codec.encode(quiet.birth())))
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                families = scrape(port)
            except OSError:
                families = {}
            if families and sample(families, "fleetdeck_nodes", verdict="waiting") == 1:
                break
            assert time.monotonic() < deadline, "the waiting node never showed"
            time.sleep(0.5)
        assert sample(families, "fleetdeck_nodes", verdict="ok") == 0
        assert sample(families, "fleetdeck_node_verdict", node="gpu0042", verdict="waiting") == 1
        assert sample(families, "fleetdeck_node_verdict", node="gpu0042", verdict="ok") == 0
        assert sample(families, "fleetdeck_broker_connected", cluster=CLUSTER) == 1
        age = sample(families, "fleetdeck_broker_last_message_age_seconds", cluster=CLUSTER)
        assert age is not None and 0 <= age < 30
        status, text = get(port, "/")
        assert status == 200 and "/metrics" in text and "fleetdeck_" not in text
        for path in ("/nope", "/metrics/", "/favicon.ico"):
            status, text = get(port, path)
            assert status == 404 and "/metrics" in text, path
        mosquitto.stop()
        deadline = time.monotonic() + 20
        while sample(scrape(port), "fleetdeck_broker_connected", cluster=CLUSTER) != 0:
            assert time.monotonic() < deadline, "still connected to a stopped broker"
            time.sleep(0.5)
    finally:
        stop_process(col)
