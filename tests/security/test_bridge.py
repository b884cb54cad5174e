"""Two clusters on two brokers, each bridged into a site broker with the shipped recipe
(deploy/mosquitto/mkbridge.sh: TLS and its own user on the site side, the site's shipped ACL
plus the generated bridge blocks). A console on the site broker sees both clusters and drains a
node of cluster b, which reaches DRAINED through the bridge."""

import asyncio
import contextlib
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import aiomqtt
import pytest

from fleetdeck.broker import MOSQUITTO, ManagedBroker, free_port, mosquitto_conf
from fleetdeck.console.digest import DIGEST_EVERY_S, STALE_PERIODS
from tests.conftest import run_cli, spawn, stop_process
from tests.security.deploy import DEPLOY, USERS, needs_tools, secured_broker

pytestmark = needs_tools
CLUSTERS = ("a", "b")


def make_bridge(cluster: str, site_tls: int, password: str, ca: Path, out: Path,
                telemetry: bool) -> tuple[str, str]:
    args = ["bash", str(DEPLOY / "mkbridge.sh"), cluster, f"127.0.0.1:{site_tls}", password,
            str(ca), str(out)] + (["telemetry"] if telemetry else [])
    subprocess.run(args, check=True, capture_output=True)
    conf, acl = ((out / f"bridge-{cluster}.conf").read_text(),
                 (out / f"acl-bridge-{cluster}").read_text())
    # The scheduler's birth and Last Will cross too: the site's consoles say when job states
    # are a dead scheduler's last word (docs/protocol.md, "Scheduler status").
    root = f"fleetdeck/v1/{cluster}"
    assert f"topic {root}/sched/status out 1" in conf
    assert f"topic write {root}/sched/status" in acl
    # The bridge's own state, under the cluster's root, and the site lets it write only that.
    assert f"notification_topic {root}/bridge/state" in conf
    assert f"topic write {root}/bridge/state" in acl
    return conf, acl


def test_mkbridge_sets_a_keepalive_that_says_a_cut_before_any_node_goes_stale(tmp_path):
    """A review: with Mosquitto's default keepalive (60 s) a network cut was said by the site
    broker's "0" only ~90 s on, after the cluster's nodes had all read stale as a collector's.
    The site broker drops a silent client after 1.5 x its keepalive (MQTT 3.1.1, 3.1.2.10); a
    node's last digest crossed up to one period before the cut and reads stale STALE_PERIODS
    periods after it."""
    conf, _acl = make_bridge("b", 8883, "pw", tmp_path / "ca.crt", tmp_path / "gen",
                             telemetry=False)
    keepalive = [int(line.split()[1]) for line in conf.splitlines()
                 if line.startswith("keepalive_interval ")]
    assert len(keepalive) == 1, conf
    assert keepalive[0] >= 5  # Mosquitto's least (mosquitto.conf(5))
    assert 1.5 * keepalive[0] < (STALE_PERIODS - 1) * DIGEST_EVERY_S


def wait_status(url: str, cluster: str, want, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    out: dict = {}
    while time.monotonic() < deadline:
        res = run_cli("status", "--broker", url, "--cluster", cluster, "--json", "--wait", "2")
        if res.returncode == 0:
            out = json.loads(res.stdout)
            if want(out):
                return out
        time.sleep(0.5)
    pytest.fail(f"status of cluster {cluster} on {url} never matched: {out}")


@contextlib.contextmanager
def bridged_site(tmp_path: Path) -> Iterator[tuple[str, dict[str, ManagedBroker]]]:
    """The site broker (shipped ACL, TLS, the bridge users) with clusters a and b each on its
    own broker, bridged in by the recipe and running ``sim --nodes 3``: (a console's URL on the
    site, the clusters' brokers)."""
    work = tmp_path / "site"
    work.mkdir()
    # The site's users: the shipped roles plus one bridge user per cluster; the bridge blocks
    # are appended to a copy of the shipped ACL before the site broker starts.
    subprocess.run(["bash", str(DEPLOY / "mkusers.sh"), str(work / "passwd"),
                    str(work / "creds"), *(f"bridge-{c}" for c in CLUSTERS)],
                   check=True, capture_output=True)
    creds = dict(line.split() for line in (work / "creds").read_text().splitlines())
    ca = work / "pki" / "ca.crt"  # made by mkcerts.sh inside secured_broker
    acl = tmp_path / "acl"
    site_tls_port = free_port()  # the bridge configs name it before the site broker starts
    blocks: dict[str, str] = {}
    confs: dict[str, str] = {}
    for c in CLUSTERS:
        confs[c], blocks[c] = make_bridge(c, site_tls_port, creds[f"bridge-{c}"], ca,
                                          tmp_path / "bridges", telemetry=(c == "a"))
    acl.write_text((DEPLOY / "acl").read_text() + "\n" + "\n".join(blocks.values()))
    with secured_broker(work, users=USERS, acl=acl, tls_port=site_tls_port) as (
            site, site_creds, _tls, _dir):
        site_url = f"mqtt://console:{site_creds['console']}@127.0.0.1:{site.port}"
        brokers: dict[str, ManagedBroker] = {}
        sims = {}
        try:
            for c in CLUSTERS:
                cdir = tmp_path / f"cluster-{c}"
                cdir.mkdir()
                brokers[c] = ManagedBroker(MOSQUITTO, workdir=cdir)
                # As root Mosquitto drops to 'mosquitto', which cannot read the CA in
                # pytest's private tmp dir (tests/security/deploy.py does the same).
                user = "user root\n" if os.geteuid() == 0 else ""
                brokers[c].config = (user + mosquitto_conf(brokers[c].port)
                                     + "log_type notice\n" + confs[c])
                brokers[c].start()
                sims[c] = spawn("sim", "--broker", str(brokers[c].url), "--cluster", c,
                                "--nodes", "3", "--jobs", "0", log=cdir / "sim.log")
            yield site_url, brokers
        finally:
            for proc in sims.values():
                stop_process(proc)
            for broker in brokers.values():
                broker.stop()


@pytest.mark.timeout(300)
def test_a_console_on_the_site_broker_drains_a_node_of_a_bridged_cluster(tmp_path):
    with bridged_site(tmp_path) as (site_url, brokers):
        # Cluster a crosses with its telemetry: nodes are judged ok on the site.
        wait_status(site_url, "a", lambda s: s["totals"]["by_verdict"]["ok"] == 3)
        # Cluster b crosses without telemetry: its nodes are known from their births.
        wait_status(site_url, "b", lambda s: s["totals"]["nodes"] == 3)
        res = run_cli("drain", "gpu0002", "--cluster", "b", "--broker", site_url,
                      "--reason", "bridged drain", "--now", "--timeout", "60")
        assert res.returncode == 0, res.stdout + res.stderr
        assert "DRAINED" in res.stdout or "drained" in res.stdout, res.stdout
        # The cluster's own broker agrees: the agent drained for real.
        local = wait_status(str(brokers["b"].url), "b", lambda s: any(
            n["id"] == "gpu0002" and n["drain"] == "drained" for n in s["nodes"]))
        assert {n["id"]: n["drain"] for n in local["nodes"]} == {
            "gpu0001": "none", "gpu0002": "drained", "gpu0003": "none"}
        # Nothing of cluster a was touched.
        a = wait_status(site_url, "a", lambda s: True)
        assert all(n["drain"] == "none" for n in a["nodes"])


@pytest.mark.timeout(300)
def test_a_console_on_digests_on_the_site_broker_knows_the_bridged_clusters_collectors(
        tmp_path):
    """The collectors' births and Last Wills cross the bridge with their digests: a site
    console on digests lists them, and says when none is live (2026-12-07 drill: the recipe
    forwarded digest/# alone, so the site's `status --digests` listed no collector, and with
    cluster b's only collector SIGKILLed read its last digests with exit 0 where the cluster's
    own broker said "no collector is live", exit 3)."""
    with bridged_site(tmp_path) as (site_url, brokers):
        collector = spawn("collect", "--broker", str(brokers["b"].url), "--cluster", "b",
                          "--shard", "1/1", "--db", str(tmp_path / "b-shard-1.db"),
                          log=tmp_path / "collect.log")
        try:
            deadline = time.monotonic() + 60
            out: dict = {}
            while time.monotonic() < deadline:
                res = run_cli("status", "--broker", site_url, "--cluster", "b", "--digests",
                              "--json", "--wait", "2")
                out = json.loads(res.stdout) if res.stdout.strip() else {}
                if out.get("totals", {}).get("nodes") == 3 and out.get("collectors"):
                    break
                time.sleep(0.5)
            assert [(c["collector"], c["online"]) for c in out.get("collectors", [])] == [
                ("shard-1", True)], out
        finally:
            collector.kill()
            collector.wait()
        deadline = time.monotonic() + 30
        while True:
            res = run_cli("status", "--broker", site_url, "--cluster", "b", "--digests",
                          "--wait", "2")
            if res.returncode == 3 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert res.returncode == 3, res.stdout + res.stderr
        assert "no collector is live" in res.stderr, res.stderr


def site_digests(site_url: str, want, timeout: float, what: str,
                 as_json: bool = True) -> subprocess.CompletedProcess[str]:
    """``status --digests`` of cluster b on the site broker, until ``want`` of its result."""
    deadline = time.monotonic() + timeout
    while True:
        res = run_cli("status", "--broker", site_url, "--cluster", "b", "--digests",
                      "--wait", "2", *(["--json"] if as_json else []))
        if want(res) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert want(res), f"{what}: {res.returncode} {res.stdout} {res.stderr}"
    return res


def _bridge(res: subprocess.CompletedProcess[str]) -> dict:
    out = json.loads(res.stdout) if res.stdout.strip() else {}
    return out.get("bridge") or {}


@pytest.mark.timeout(300)
def test_a_site_console_on_digests_says_the_bridge_from_a_cluster_is_down(tmp_path):
    """The bridge's own state crosses (Mosquitto's ``notifications``, mkbridge.sh): with
    cluster b's broker SIGKILLed, the site's console on digests says once that the bridge from
    cluster b is down and that its nodes are not stale for their own sake (before: nothing
    named the bridge, and the nodes went stale one by one as their collector's, "collector
    shard-1: no digest of its 3 nodes"); back when the broker is."""
    with bridged_site(tmp_path) as (site_url, brokers):
        collector = spawn("collect", "--broker", str(brokers["b"].url), "--cluster", "b",
                          "--shard", "1/1", "--db", str(tmp_path / "b-shard-1.db"),
                          log=tmp_path / "collect.log")
        try:
            up = site_digests(site_url, lambda r: r.returncode == 0 and _bridge(r).get("up")
                              and json.loads(r.stdout)["totals"]["by_verdict"].get("ok") == 3,
                              90, "bridge up, 3 nodes ok")
            assert not [i for i in json.loads(up.stdout)["incidents"] if i["kind"] == "bridge"]
            brokers["b"].kill()
            # At once: the bridge's Last Will on the site broker, before any node is stale.
            down = site_digests(site_url, lambda r: _bridge(r).get("up") is False, 30,
                                "bridge down")
            assert down.returncode == 3, down.stderr
            assert "the bridge from cluster b is down since" in down.stderr, down.stderr
            # Its nodes' digests age past staleness: one incident of the bridge holds them.
            res = site_digests(site_url, lambda r: len(_bridge(r).get("nodes_behind", [])) == 3,
                               60, "3 nodes behind the bridge")
            out = json.loads(res.stdout)
            kinds = [i["kind"] for i in out["incidents"]]
            assert kinds == ["bridge"], out["incidents"]
            assert "its 3 nodes are not stale for their own sake" in out["incidents"][0]["title"]
            d1 = [f for n in out["nodes"] for f in n["findings"] if "no digest for" in f]
            assert len(d1) == 3 and all("bridge" in f for f in d1), out["nodes"]
            text = site_digests(site_url, lambda r: r.returncode == 3, 10, "text",
                                as_json=False)
            table = " ".join(text.stdout.split())  # the table wraps its columns
            assert "its 3 nodes are not stale for their own sake" in table, text.stdout
            assert "collector shard-1: no digest" not in table, text.stdout
            brokers["b"].start()
            back = site_digests(site_url, lambda r: r.returncode == 0 and _bridge(r).get("up")
                                and json.loads(r.stdout)["totals"]["by_verdict"].get("ok") == 3,
                                90, "bridge back")
            assert not [i for i in json.loads(back.stdout)["incidents"]
                        if i["kind"] == "bridge"]
        finally:
            collector.kill()
            collector.wait()


@pytest.mark.parametrize("args, error", [
    (["a/b", "site:8883", "pw", "ca.crt"], "invalid cluster name"),
    (["b", "site:8883", "pw", "ca.crt", "EXTRA", "everything"], "6th argument"),
    (["b"], "usage:"),
])
def test_mkbridge_refuses_bad_arguments_in_one_line(tmp_path, args, error):
    if len(args) >= 4:
        args = [*args[:4], str(tmp_path / "out"), *args[5:]]
    res = subprocess.run(["bash", str(DEPLOY / "mkbridge.sh"), *args], capture_output=True,
                         text=True, check=False)
    assert res.returncode == 2 and error in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


async def test_a_bridge_user_writes_only_its_own_clusters_collector_and_digest_topics(
        tmp_path):
    """Least privilege of the recipe's site ACL block: cluster b's bridge user (a cluster
    broker taken over, say) cannot publish a birth or Last Will for a collector of cluster a,
    nor a digest of a's nodes, and so cannot tell a site console that a's collectors are
    dead or its nodes healthy."""
    work = tmp_path / "site"
    work.mkdir()
    _conf, bridge_acl = make_bridge("b", 8883, "pw", tmp_path / "ca.crt", tmp_path / "gen",
                                    telemetry=False)
    acl = tmp_path / "acl"
    acl.write_text((DEPLOY / "acl").read_text() + "\n" + bridge_acl)
    with secured_broker(work, users=[*USERS, "bridge-b"], acl=acl) as (site, creds, _t, _d):
        async with aiomqtt.Client("127.0.0.1", site.port, username="bridge-b",
                                  password=creds["bridge-b"], identifier="bridge-b") as c:
            for cluster in CLUSTERS:
                for topic in (f"fleetdeck/v1/{cluster}/collector/shard-1",
                              f"fleetdeck/v1/{cluster}/digest/gpu0001"):
                    await c.publish(topic, b"{}", qos=1, retain=True)
        heard: set[str] = set()
        async with aiomqtt.Client("127.0.0.1", site.port, username="viewer",
                                  password=creds["viewer"], identifier="viewer-probe") as v:
            await v.subscribe("fleetdeck/v1/+/collector/+", qos=1)
            await v.subscribe("fleetdeck/v1/+/digest/+", qos=1)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(2.0):
                    async for msg in v.messages:
                        heard.add(str(msg.topic))
    assert heard == {"fleetdeck/v1/b/collector/shard-1", "fleetdeck/v1/b/digest/gpu0001"}
