"""For automation the worst answer is a confident wrong one: ``status`` against a hung or wrong
broker, or a mistyped cluster, ends with one sentence and exit 2, never an empty healthy fleet;
``collect`` on a store it cannot use says so."""

import socket
import threading
import time

from tests.conftest import eventually, run_cli, spawn, stop_process
from tests.relay import Relay


def test_status_against_a_broker_that_never_answers_is_exit_2():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:  # takes the connection, never sends a CONNACK
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        t0 = time.monotonic()
        out = run_cli("status", "--json", "--broker", f"mqtt://127.0.0.1:{port}",
                      "--wait", "3")
        took = time.monotonic() - t0
        # Several clusters connect one after another (amqtt's connect race,
        # tests/test_status_amqtt.py), but give up together: in turn, three took 17 s.
        t0 = time.monotonic()
        many = run_cli("status", "--broker", f"mqtt://127.0.0.1:{port}", "--cluster", "a,b,c",
                       "--wait", "3")
        took_many = time.monotonic() - t0
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        server.close()
    assert out.returncode == 2, out.stdout
    assert out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    # Its own time (--wait 3): the connect attempt used to run on to the transport's 10 s
    # first, and the sentence came at 10 s from the transport (a newcomer's scripts;
    # docs/protocol.md).
    assert out.stderr == (f"fleetdeck status: cannot get a status from mqtt://127.0.0.1:{port}: "
                          "no answer (CONNACK) within 3 s.\n"), out.stderr
    assert took < 9
    assert many.returncode == 2 and many.stderr.count("no answer (CONNACK)") == 3, many.stderr
    assert took_many < 10


async def test_status_of_a_mistyped_cluster_names_the_clusters_there(mosquitto, tmp_path):
    url = str(mosquitto.url)
    sim = spawn("sim", "--broker", url, "--cluster", "prod-a", "--nodes", "2",
                log=tmp_path / "sim.log")
    try:
        await eventually(lambda: run_cli("status", "--json", "--broker", url, "--cluster",
                                         "prod-a", "--wait", "1").returncode == 0, 30,
                         interval=0.5, message="sim up")
        out = run_cli("status", "--broker", url, "--cluster", "prod-b", "--wait", "1")
    finally:
        stop_process(sim)
    assert out.returncode == 2
    assert "no node of cluster 'prod-b'" in out.stderr and "prod-a" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


async def test_one_shot_status_reads_a_hung_node_as_stale(mosquitto, tmp_path):
    import os
    import signal

    url = str(mosquitto.url)
    agent = spawn("agent", "--broker", url, "--cluster", "hang", "--node-id", "gpu0001",
                  log=tmp_path / "agent.log")
    try:
        await eventually(lambda: run_cli("status", "--json", "--broker", url, "--cluster",
                                         "hang", "--wait", "1").returncode == 0, 30,
                         interval=0.5, message="agent up")
        os.kill(agent.pid, signal.SIGSTOP)  # hung: its session and retained status stay
        out = run_cli("status", "--json", "--broker", url, "--cluster", "hang")
    finally:
        os.kill(agent.pid, signal.SIGCONT)
        stop_process(agent)
    import json

    (node,) = json.loads(out.stdout)["nodes"]
    assert node["verdict"] == "stale", node


async def test_status_waits_for_the_first_sample_of_agents_that_sample_less_often(
        mosquitto, tmp_path):
    """Agents on ``--interval 5`` read "waiting" after the 3.5 s watch and ``status --fail-on
    failed`` exited 3 until the script raised ``--wait``: without ``--wait`` the watch goes on
    while a node's first sample is due by its birth's interval; a ``--wait`` given is kept."""
    import json

    url = str(mosquitto.url)
    agent = spawn("agent", "--broker", url, "--cluster", "slow", "--node-id", "gpu0001",
                  "--interval", "5", log=tmp_path / "agent.log")
    try:
        await eventually(lambda: "gpu0001" in run_cli(
            "status", "--json", "--broker", url, "--cluster", "slow", "--wait", "1").stdout,
            30, interval=0.5, message="the agent's birth")
        out = run_cli("status", "--json", "--broker", url, "--cluster", "slow",
                      "--fail-on", "failed")
        short = run_cli("status", "--json", "--broker", url, "--cluster", "slow",
                        "--fail-on", "failed", "--wait", "1")
    finally:
        stop_process(agent)
    got = json.loads(out.stdout)
    (node,) = got["nodes"]
    assert out.returncode == 0 and node["verdict"] == "ok", (out.stderr, node)
    assert 3.5 <= got["collected_s"] <= 12.5, got["collected_s"]
    assert short.returncode == 3 and "sent no telemetry in the 1 s watch" in short.stderr
    assert json.loads(short.stdout)["collected_s"] == 1


def test_collect_into_a_store_it_cannot_make_is_one_sentence(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the store's folder should be")
    out = run_cli("collect", "--broker", "mqtt://127.0.0.1:1", "--db",
                  str(blocker / "store.db"))
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "history store" in out.stderr


async def test_drain_with_an_audit_log_it_cannot_write_sends_nothing(mosquitto, tmp_path):
    """A mistyped or unwritable ``--audit-log`` used to drain the node silently, with no record
    and exit 0 (the write error was counted and never said): now one sentence, exit 2, and the
    node is still in service."""
    import json

    url = str(mosquitto.url)
    agent = spawn("agent", "--broker", url, "--cluster", "audit", "--node-id", "gpu0001",
                  log=tmp_path / "agent.log")
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the audit log's folder should be")
    try:
        await eventually(lambda: run_cli("status", "--json", "--broker", url, "--cluster",
                                         "audit", "--wait", "1").returncode == 0, 30,
                         interval=0.5, message="agent up")
        out = run_cli("drain", "gpu0001", "--reason", "PSU", "--broker", url, "--cluster",
                      "audit", "--audit-log", str(blocker / "audit.jsonl"), "--timeout", "10")
        status = run_cli("status", "--json", "--broker", url, "--cluster", "audit", "--wait",
                         "1")
    finally:
        stop_process(agent)
    assert out.returncode == 2, out
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert "cannot write audit log" in out.stderr and "nothing was sent" in out.stderr
    (node,) = json.loads(status.stdout)["nodes"]
    assert node["drain"] == "none", node


async def test_drain_of_a_hung_node_times_out_saying_why_and_never_acts_later(mosquitto,
                                                                              tmp_path):
    """A drain sent to a hung agent (SIGSTOP) ends in a time-out that says the node is stale
    and why it never answered (before: "no result within 4 s" and nothing more); and the
    command expires with the run, so the agent, woken (SIGCONT) after the CLI said
    "timed_out", rejects it as expired (before it lived 10 s whatever ``--timeout`` said, and
    the node was drained behind the operator's back)."""
    import json
    import os
    import signal

    url = str(mosquitto.url)
    agent = spawn("agent", "--broker", url, "--cluster", "hung", "--node-id", "gpu0001",
                  log=tmp_path / "agent.log")
    try:
        await eventually(lambda: run_cli("status", "--json", "--broker", url, "--cluster",
                                         "hung", "--wait", "1").returncode == 0, 30,
                         interval=0.5, message="agent up")
        os.kill(agent.pid, signal.SIGSTOP)
        try:
            out = run_cli("drain", "gpu0001", "--reason", "PSU", "--broker", url, "--cluster",
                          "hung", "--audit-log", str(tmp_path / "audit.jsonl"), "--timeout", "4")
        finally:
            os.kill(agent.pid, signal.SIGCONT)
        time.sleep(3.0)  # the woken agent reads the queued drain
        status = run_cli("status", "--json", "--broker", url, "--cluster", "hung", "--wait", "1")
    finally:
        stop_process(agent)
    assert out.returncode == 4, out
    last = out.stdout.strip().splitlines()[-1]
    assert "gpu0001: timed_out" in last and "the node is stale (H1 no telemetry" in last, last
    assert "never answered" in last, last
    (node,) = json.loads(status.stdout)["nodes"]
    assert node["drain"] == "none", (node, (tmp_path / "agent.log").read_text()[-2000:])


def test_status_of_an_empty_broker_asks_whether_anything_publishes(mosquitto):
    """With no node of any cluster on the broker, "wrong --cluster?" sent a newcomer looking
    at the wrong thing: nothing publishes there."""
    out = run_cli("status", "--broker", str(mosquitto.url), "--cluster", "nobody", "--wait", "1")
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "is an agent or 'fleetdeck sim' running against this broker?" in out.stderr
    assert "wrong --cluster" not in out.stderr


async def test_a_node_whose_retained_birth_is_garbage_is_not_left_out_of_status(
        mosquitto, tmp_path):
    """A garbage birth retained on the broker (a corrupt publisher, an agent of a newer major
    version) made `status` leave the node out of the counts, its dead GPU with it, exit 0 (an
    SRE drill). Now status asks the node for its birth again and judges it; one that does not
    answer is named as unknown and --fail-on exits 3."""
    import json

    from fleetdeck.brokerurl import make_client
    from fleetdeck.protocol.topics import Kind, topic_for

    url = str(mosquitto.url)
    agent = spawn("agent", "--broker", url, "--cluster", "garb", "--node-id", "gpu0009",
                  log=tmp_path / "agent.log")
    birth = topic_for("garb", Kind.BIRTH, "gpu0009")
    try:
        await eventually(lambda: "gpu0009" in run_cli(
            "status", "--json", "--broker", url, "--cluster", "garb", "--wait", "1").stdout,
            30, interval=0.5, message="the agent")
        async with make_client(mosquitto.url, "garbage") as c:
            await c.publish(birth, b'{"v":2,"node":"gpu0009"}', qos=1, retain=True)
        out = run_cli("status", "--json", "--broker", url, "--cluster", "garb", "--fail-on",
                      "failed")
        got = json.loads(out.stdout)
        assert [n["id"] for n in got["nodes"]] == ["gpu0009"], (got["unborn"], out.stderr)
        assert got["nodes"][0]["verdict"] == "ok" and out.returncode == 0, out.stderr
    finally:
        stop_process(agent)


def test_a_node_heard_without_a_readable_birth_is_unknown_not_absent(capsys):
    """One that does not answer (its agent cannot read the ask, or its birth is garbage
    again) is named, not judged, and with --fail-on not taken for healthy."""
    from fleetdeck.console.cli.status import EXIT_UNSEEN, unhealthy, unheard
    from fleetdeck.console.ingest import Ingest
    from fleetdeck.console.session import ConsoleSession
    from fleetdeck.console.summary import fleet_summary
    from fleetdeck.protocol.topics import Kind, topic_for
    from tests.tui.fleet import CLUSTER, Clock, SynthFleet

    clock = Clock()
    session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    fleet = SynthFleet(2, clock)
    fleet.birth(session.ingest, names=["gpu0001"])
    session.ingest.handle(topic_for(CLUSTER, Kind.BIRTH, "gpu0002"), b"{garbage", clock())
    fleet.telemetry(session.ingest)
    clock.advance(1.0)
    session.tick()
    out = fleet_summary(session.state, clock())
    assert [n["id"] for n in out["nodes"]] == ["gpu0001"] and out["unborn"] == ["gpu0002"]
    waiting = unheard([out], 3.5)
    assert waiting == ["gpu0002"]
    err = capsys.readouterr().err
    assert "1 node (gpu0002) sent messages but no birth" in err and "see 'malformed'" in err
    assert unhealthy([out], "failed", waiting) == EXIT_UNSEEN


def test_a_node_whose_birth_the_broker_dropped_is_not_sent_to_malformed(capsys):
    """On a default Mosquitto (max_queued_messages 1000) the retained burst of 2,048 nodes was
    cut; 29 live nodes were heard talking with no birth, and status told the operator to "see
    'malformed'", which was 0 (an SRE run). Nothing malformed: the cut is named where one was
    judged, else the birth is only not in yet; a garbage birth still points at 'malformed'."""
    from fleetdeck.console.cli.status import unheard
    from fleetdeck.console.ingest import Ingest
    from fleetdeck.console.session import ConsoleSession
    from fleetdeck.console.summary import fleet_summary
    from tests.tui.fleet import CLUSTER, Clock, SynthFleet

    clock = Clock()
    session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    fleet = SynthFleet(2, clock)
    fleet.birth(session.ingest, names=["gpu0001"])  # gpu0002's birth never came
    fleet.telemetry(session.ingest)
    clock.advance(1.0)
    session.tick()
    out = fleet_summary(session.state, clock())
    assert out["unborn"] == ["gpu0002"] and out["totals"]["malformed"] == 0
    assert unheard([out], 3.5) == ["gpu0002"]
    err = capsys.readouterr().err
    assert "1 node (gpu0002) sent messages but no birth yet:" in err
    assert "malformed" not in err
    out["retained_burst_cut"] = {"nodes_without_status": 1020, "nodes": 2048}
    unheard([out], 3.5)
    err = capsys.readouterr().err
    assert "the broker most likely dropped it with the retained burst it cut" in err
    assert "malformed" not in err


def test_a_console_that_cannot_write_its_audit_log_does_not_start(tmp_path):
    """``console --audit-log /tmp`` drained and resumed with nothing recorded and no word on
    screen (a newcomer's run): it says so in one sentence before the screen opens, as the
    one-shot commands do. ``--read-only`` sends nothing, so it needs no log; and no command
    takes an empty ``--operator`` (the audit said "requested by ")."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the audit log's folder should be")
    out = run_cli("console", "--broker", "mqtt://127.0.0.1:1", "--audit-log",
                  str(blocker / "audit.jsonl"), "--no-store")
    assert out.returncode == 2, out
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    assert "cannot write audit log" in out.stderr and "--read-only" in out.stderr
    for argv in (("console", "--operator", ""), ("resume", "gpu0001", "--operator", " ")):
        out = run_cli(*argv, "--broker", "mqtt://127.0.0.1:1")
        assert out.returncode == 2, out
        assert "--operator must name who asks" in out.stderr and "Traceback" not in out.stderr


def test_a_node_whose_clock_is_an_hour_ahead_is_named_with_why(capsys):
    """Every message of a node whose clock is an hour fast is refused (its bdSeq, the clock at
    connect, is far ahead): it was in neither "nodes" nor "unborn", and `status --fail-on`
    exited 0 over it (an SRE drill). It is unborn, and the refusal says what to check."""
    from fleetdeck.console.cli.status import EXIT_UNSEEN, unhealthy, unheard
    from fleetdeck.console.ingest import Ingest
    from fleetdeck.console.state import FleetState
    from fleetdeck.console.summary import fleet_summary
    from fleetdeck.protocol.topics import Kind
    from tests.helpers import FakeNode

    node = FakeNode(t0=1_000_000.0 + 3600)  # its clock; ours is an hour behind
    node.agent.bd_seq = node.agent._next_bd_seq()
    ingest = Ingest(node.cluster)
    state = FleetState(node.cluster, ingest.malformed)
    ours = 1_000_000.0
    for msg, kind in ((node.birth(), Kind.BIRTH), (node.status(), Kind.STATUS),
                      (node.telemetry(), Kind.TELEMETRY)):
        node.feed(ingest, msg, kind, rx=ours)
    state.apply(ingest.take_batch(), ours)
    state.judge_fleet(ours)
    out = fleet_summary(state, ours)
    assert out["nodes"] == [] and out["unborn"] == ["gpu0001"]
    why = out["unborn_why"]["gpu0001"]
    assert "3600 s ahead of the receive clock" in why and "is the node's clock right?" in why
    waiting = unheard([out], 3.5)
    assert waiting == ["gpu0001"]
    err = capsys.readouterr().err
    assert "1 node (gpu0001) sent messages but no birth" in err
    assert "gpu0001's birth was refused: invalid: bdSeq" in err
    assert unhealthy([out], "failed", waiting) == EXIT_UNSEEN


async def test_status_of_several_clusters_over_a_slow_broker_gives_each_its_own_connect(
        mosquitto, tmp_path):
    """Connected one after another, the third of three clusters used to get what the first
    two left of one shared 5 s: over a broker that takes 2 s a connect it failed with "no
    answer (CONNACK) within 5 s" after 1 s of its own. Each now has its own 5 s."""
    import json

    url = str(mosquitto.url)
    sims = [spawn("sim", "--broker", url, "--cluster", name, "--nodes", "1",
                  log=tmp_path / f"sim-{name}.log") for name in "abc"]
    relay = Relay((mosquitto.url.host, mosquitto.url.port), answer_delay_s=2.0)
    try:
        for name in "abc":
            await eventually(lambda name=name: run_cli(
                "status", "--json", "--broker", url, "--cluster", name,
                "--wait", "1").returncode == 0, 30, interval=0.5, message=f"sim {name} up")
        # No --wait: one shorter than a connect ends the watch before it (as for one cluster).
        out = run_cli("status", "--json", "--broker", f"mqtt://127.0.0.1:{relay.port}",
                      "--cluster", "a,b,c")
    finally:
        relay.close()
        for sim in sims:
            stop_process(sim)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert [c.get("error") for c in got["clusters"]] == [None, None, None], got["clusters"]
    assert [len(c["nodes"]) for c in got["clusters"]] == [1, 1, 1]
