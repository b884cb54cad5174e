"""The CLI a user types: plain one-sentence errors, --once output, schema."""

import json

import pytest

from fleetdeck.broker import free_port
from tests.conftest import run_cli


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["status", "--broker", "http://x:1"], "must start with mqtt://"),
        (["status", "--broker", "mqtt://127.0.0.1:notaport"],
         "the broker URL's port 'notaport' is not a number from 1 to 65535"),
        (["status", "--broker", "mqtt://u:secret@127.0.0.1:99999"], "port '99999' is not a"),
        (["status", "--wait", "-1"], "--wait must be greater than 0"),
        (["status", "--cluster", "a/b"], "cluster 'a/b'"),
        (["agent", "--node-id", "gpu#1", "--once"], "node id 'gpu#1'"),
        (["sim", "--nodes", "lots"], "--nodes must be a number"),
        (["agent", "--source", "bogus", "--once", "--node-id", "n1"],
         "unknown reader(s) bogus; give sim (a simulated node)"),
        # A mistyped root read "class/infiniband: missing (no InfiniBand driver loaded?)".
        (["agent", "--source", "sysfs", "--sysfs-root", "/nonexistent", "--once", "--node-id",
          "n1"], "sysfs root /nonexistent (--sysfs-root, sysfs_root) is not a directory"),
        (["nosuchcommand"], "unknown command 'nosuchcommand': choose from 'demo', "),
        # Without --headless these opened the console and were ignored.
        (["replay", "fixtures/drain.jsonl.gz", "--until", "5"],
         "fleetdeck replay: --until only works with --headless"),
        (["replay", "fixtures/drain.jsonl.gz", "--summary-json", "--tick", "3"],
         "fleetdeck replay: --tick and --summary-json only work with --headless"),
        # Taken for --to-broker 30: "broker URL '30' must start with mqtt://" (a replay drill).
        (["replay", "fixtures/drain.jsonl.gz", "--headless", "--to", "30"],
         "fleetdeck replay: --to 30: say which: --headless --until 30 stops that far into the "
         "recording, --to-broker URL replays it into a broker."),
        (["replay", "fixtures/drain.jsonl.gz", "--head"],
         "--head is no option of fleetdeck replay: did you mean --headless?"),
        (["broker", "--kind", "amqtt", "--bind", "0.0.0.0", "--port", "1"], "loopback only"),
        # "-" made files named "-" and "-.idx" in the current folder (a newcomer's scripts).
        (["record", "--out", "-", "--broker", "mqtt://127.0.0.1:1"],
         "--out needs a file name (.jsonl, or .jsonl.gz)"),
        (["sim", "--nodes", "2", "--out", "-", "--duration", "1m"],
         "--out needs a file name (.jsonl, or .jsonl.gz)"),
    ],
)
def test_bad_arguments_get_one_plain_sentence(args, needle):
    res = run_cli(*args)
    assert res.returncode != 0
    assert needle in res.stderr
    assert "Traceback" not in res.stderr and "secret" not in res.stderr
    assert "could not be cast" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


@pytest.mark.parametrize("command", [["drain", "gpu0001"], ["restart-job", "4105"]])
def test_restart_job_needs_a_reason_as_drain_does(command, tmp_path):
    """restart-job went out with no reason while drain and the TUI's restart dialog ask one: a
    requeue throws away the work since the checkpoint, and the audit log did not say why."""
    res = run_cli(*command)
    assert res.returncode == 2
    example = {"drain": "fleetdeck drain gpu0012 --reason 'XID 79 OPS-1' --now",
               "restart-job": "fleetdeck restart-job 4102 --reason 'gpu0040 drained, OPS-2'"}
    assert res.stderr == (f"fleetdeck {command[0]}: --reason is required, e.g. "
                          f"{example[command[0]]} (see 'fleetdeck {command[0]} --help').\n")
    # A blank one is refused before the broker is asked, and audited as refused.
    audit = tmp_path / "audit.jsonl"
    res = run_cli(*command, "--reason", " ", "--broker", f"mqtt://127.0.0.1:{free_port()}",
                  "--audit-log", str(audit))
    assert res.returncode == 2
    verb = "drain" if command[0] == "drain" else "restart a job"
    assert res.stderr == (f"fleetdeck {command[0]}: a reason is required to {verb} "
                          "(--reason TEXT)\n")
    assert [json.loads(line)["outcome"] for line in audit.read_text().splitlines()] == [
        "refused"]


@pytest.mark.parametrize(("command", "option", "said"), [
    (["resume", "gpu0001"], "--now", "(only drain takes it)"),
    (["restart-job", "4101", "--reason", "x"], "--now", "(only drain takes it)"),
    (["status", "--wait", "1"], "--dry-run", "(only drain, resume, restart-job take it)"),
    # A tired operator's --json on a command that has none (its outcome is its exit status).
    (["drain", "gpu0001", "--reason", "x"], "--json",
     "(only status, events, report, history take it)"),
    (["status"], "--jsn", ": did you mean --json?")])
def test_an_unknown_option_names_the_subcommand_and_its_help(command, option, said):
    """argparse blamed 'fleetdeck' and sent the reader to the top-level help, where the
    subcommand's options are not listed; and it said "unrecognized arguments", not what to
    type: the option of this command it is a typo of, or the commands that have it."""
    res = run_cli(*command, option)
    assert res.returncode == 2
    assert res.stderr == (f"fleetdeck {command[0]}: {option} is no option of fleetdeck "
                          f"{command[0]}{'' if said[0] == ':' else ' '}{said} "
                          f"(see 'fleetdeck {command[0]} --help').\n")


@pytest.mark.parametrize(("args", "said"), [
    ([], "fleetdeck: give a command: 'fleetdeck demo' to try it on a simulated fleet, "
         "'fleetdeck status' for a fleet's health (see 'fleetdeck --help').\n"),
    (["stauts"], "fleetdeck: unknown command 'stauts': did you mean 'status'? "
                 "(see 'fleetdeck --help').\n"),
    (["drain", "--reason", "x"], "fleetdeck drain: HOSTLIST is required, e.g. fleetdeck drain "
     "gpu0012 --reason 'XID 79 OPS-1' --now (see 'fleetdeck drain --help').\n"),
    # argparse finds --reason missing before --reson unknown: the typo is what to fix.
    (["drain", "gpu0001", "--reson", "x"], "fleetdeck drain: --reason is required (--reson is "
     "no option: a typo?), e.g. fleetdeck drain gpu0012 --reason 'XID 79 OPS-1' --now "
     "(see 'fleetdeck drain --help').\n"),
    (["status", "--fail-on", "faild"], "fleetdeck status: argument --fail-on: 'faild' is no "
     "choice: did you mean 'failed'? (see 'fleetdeck status --help').\n"),
    # KEY=VALUE is optional (argparse called it required); --timeout as drain's (was --wait).
    (["inject"], "fleetdeck inject: FAULT is required, e.g. fleetdeck inject xid79 "
     "node=gpu0012 gpu=3 (see 'fleetdeck inject --help').\n"),
    (["inject", "xid79", "node=gpu0012", "--timeout", "0"], "fleetdeck inject: argument "
     "--timeout/--wait: --timeout must be greater than 0, not 0 (see 'fleetdeck inject "
     "--help').\n")])
def test_a_tired_operators_mistake_reads_what_to_type(args, said):
    """A 3 a.m. newcomer's run: no command, a mistyped one, a missing argument, an option's
    typo, a choice's typo read as argparse's "the following arguments are required" and
    "invalid choice", which say what is wrong, not what to type."""
    res = run_cli(*args)
    assert (res.returncode, res.stderr) == (2, said)


def test_every_subcommand_help_has_an_example_and_the_one_shots_their_exit_status(
        monkeypatch):
    """Each --help ends with a command line to paste, kept whole by the wrapping; drain,
    resume, restart-job, retire and status said their exit statuses, inject and the store
    readers did not (a newcomer's 3 a.m. run)."""
    import argparse

    from fleetdeck.cli import EXAMPLES, build_parser

    monkeypatch.setenv("COLUMNS", "80")
    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(EXAMPLES) == set(subs.choices)
    for name, sub in subs.choices.items():
        text = sub.format_help()
        assert f"example:\n  {EXAMPLES[name]}\n" in text, name
        if name in {"drain", "resume", "restart-job", "retire", "status", "inject", "events",
                    "report", "history", "record", "replay"}:
            assert "exit 0" in text.lower() or "exit status: 0" in text, name
    monkeypatch.setenv("COLUMNS", "200")
    listing = build_parser().format_help()
    assert listing.endswith("To begin:\n  fleetdeck demo\n  fleetdeck status --broker "
                            "mqtt://127.0.0.1:1883\n")
    # 6 is a drain's alone (a resume never ends in it).
    assert [line.split()[0] for line in listing.splitlines() if "DRAINING" in line] == [
        "drain"]


def test_unreachable_broker_is_one_sentence():
    url = f"mqtt://127.0.0.1:{free_port()}"
    res = run_cli("status", "--broker", url, "--wait", "1")
    assert res.returncode != 0
    assert "cannot reach the MQTT broker" in res.stderr
    assert res.stderr.count(url) == 1, res.stderr
    assert "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_agent_once_prints_birth_and_telemetry_without_a_broker():
    res = run_cli("agent", "--node-id", "gpu0042", "--source", "sim", "--once",
                  "--broker", "mqtt://127.0.0.1:1")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    birth, tel = out["birth"], out["telemetry"]
    assert birth["node"] == tel["node"] == "gpu0042"
    assert len(birth["gpus"]) == 8 and len(birth["ib_ports"]) == 8
    assert {p["dev"] for p in birth["ib_ports"]} == {f"mlx5_ib{i}" for i in range(8)}
    assert tel["seq"] == 1 and tel["bdSeq"] == birth["bdSeq"]
    assert all(p["rate_gbps"] == 400 and p["state"] == "ACTIVE" for p in tel["ib_ports"])


def test_schema_prints_every_message():
    res = run_cli("schema")
    assert res.returncode == 0
    assert set(json.loads(res.stdout)) >= {"birth", "status", "telemetry", "command", "ack"}


def test_agent_config_file_env_and_flags(tmp_path, monkeypatch):
    cfg = tmp_path / "agent.toml"
    cfg.write_text('cluster = "prod"\nnode_id = "gpu0042"\ninterval_s = 5\nkeepalive = 30\n')
    monkeypatch.setenv("FLEETDECK_KEEPALIVE", "20")
    res = run_cli("agent", "--config", str(cfg), "--check-config", "--interval", "2")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    # flag > environment > file > default
    assert (out["cluster"], out["node_id"], out["interval_s"], out["keepalive"]) == (
        "prod", "gpu0042", 2.0, 20)


@pytest.mark.parametrize(
    ("content", "needles"),
    [
        ("interval_s = -1\n", ["agent.toml line 1, 'interval_s'", "greater than 0"]),
        ("cluster = 'a/b'\n", ["line 1, 'cluster'", "cluster 'a/b'"]),
        ("colour = 'blue'\n", ["'colour': unknown setting"]),
        ("broker = 'http://x'\n", ["'broker'", "mqtt://"]),
        ("source = 'sysfs+gpu'\n", ["'source'", "unknown reader(s) gpu"]),
        ("interval_s = \n", ["agent.toml", "line 1"]),
        # Settings under a header, as many daemons' files have them: "'agent': unknown
        # setting" named no header (a newcomer's agent.toml).
        ("# site\n[agent]\nbroker = 'mqtt://127.0.0.1:1883'\n",
         ["agent.toml line 2, 'agent': [agent] is a table header; this file takes its "
          "settings at the top level, under no header"]),
    ],
)
def test_bad_agent_config_is_one_sentence_naming_file_line_and_field(tmp_path, content,
                                                                     needles):
    cfg = tmp_path / "agent.toml"
    cfg.write_text(content)
    res = run_cli("agent", "--config", str(cfg), "--check-config")
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    for needle in needles:
        assert needle in res.stderr, res.stderr


@pytest.mark.parametrize(
    ("content", "meant"),
    [("interval = 10\n", "interval_s"), ("intervall_s = 10\n", "interval_s"),
     ("expect-gpus = 8\n", "expect_gpus"), ("leef = 'leaf03'\n", "leaf")],
)
def test_unknown_agent_setting_names_the_one_meant_and_lists_every_setting(tmp_path, content,
                                                                            meant):
    """A newcomer wrote `interval = 10` (the flag is --interval) and was shown a "known" list
    that left out leaf, rack, spine_group and the expect_* settings docs/real-nodes.md tells
    them to write: the sentence names the setting meant, and lists every one the file takes."""
    cfg = tmp_path / "agent.toml"
    cfg.write_text(content)
    res = run_cli("agent", "--config", str(cfg), "--check-config")
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert f"unknown setting: did you mean '{meant}'?" in res.stderr, res.stderr
    known = res.stderr.split("(known: ", 1)[1].rstrip().rstrip(").").split(", ")
    assert "leaf" in known and "expect_gpus" in known
    from agents.config import AgentSettings
    assert sorted(known) == sorted(AgentSettings.model_fields)


def test_bad_agent_flag_is_named_as_the_flag():
    res = run_cli("agent", "--check-config", "--node-id", "gpu0001", "--expect-gpus", "99")
    assert res.returncode == 2
    assert res.stderr.startswith("fleetdeck agent: --expect-gpus: "), res.stderr


def test_bad_environment_value_names_the_variable(monkeypatch):
    monkeypatch.setenv("FLEETDECK_INTERVAL_S", "fast")
    res = run_cli("agent", "--check-config")
    assert res.returncode == 2 and "$FLEETDECK_INTERVAL_S" in res.stderr


def test_check_config_and_help_agree_on_the_expected_ib_rate():
    """--check-config showed "expect_ib_rate": 0.0 where --help said "default 400": the agent
    states no rate by default, and the console judges by NDR's 400."""
    out = run_cli("agent", "--check-config", "--node-id", "gpu0001")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["expect_ib_rate"] is None
    helped = " ".join(run_cli("agent", "--help").stdout.split())
    assert "(default: not stated in its birth, and the console judges by NDR's 400)" in helped
    out = run_cli("agent", "--check-config", "--node-id", "gpu0001", "--expect-ib-rate", "200")
    assert json.loads(out.stdout)["expect_ib_rate"] == 200.0


def test_check_config_never_prints_the_broker_password():
    out = run_cli("agent", "--check-config", "--node-id", "gpu0001",
                  "--broker", "mqtt://gpu0001:s3cret-pw@127.0.0.1:1883")
    assert out.returncode == 0, out.stderr
    assert "s3cret-pw" not in out.stdout + out.stderr
    assert json.loads(out.stdout)["broker"] == "mqtt://gpu0001@127.0.0.1:1883"


def test_a_scenario_on_a_smaller_fleet_says_so_up_front(tmp_path):
    """The demo scenario on --nodes 16 showed jobs pending forever, and minutes later a
    'skipped' warning per fault aimed at them, with no word of why."""
    res = run_cli("sim", "--scenario", "demo", "--nodes", "16", "--out",
                  str(tmp_path / "small.jsonl.gz"), "--duration", "1m")
    assert res.returncode == 0, res.stderr
    assert res.stderr.splitlines()[0] == (
        "fleetdeck sim: scenario demo is written for 64 nodes, this fleet has 16; its jobs of "
        "32 nodes never start and faults aimed at them are skipped")
    fits = run_cli("sim", "--scenario", "demo", "--out", str(tmp_path / "full.jsonl.gz"),
                   "--duration", "1m")
    assert fits.returncode == 0 and "is written for" not in fits.stderr, fits.stderr


def test_a_sysfs_root_one_level_too_high_says_which_to_give(tmp_path):
    """An unpacked capture's root (holding sys/) read "class/infiniband: missing (no
    InfiniBand driver loaded?)" and exit 0, sending the reader after a driver (a newcomer's
    run): one sentence naming the directory to give."""
    (tmp_path / "sys" / "class" / "infiniband").mkdir(parents=True)
    res = run_cli("agent", "--source", "sysfs", "--sysfs-root", str(tmp_path), "--once",
                  "--node-id", "n1")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert f"has no class/ but {tmp_path / 'sys'} has" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_a_sysfs_root_one_level_too_low_says_which_to_give(tmp_path):
    """``--sysfs-root /sys/class`` read "…/class/class/infiniband: missing (no InfiniBand
    driver loaded?)" and exit 0 (a real-node audit): one sentence naming the directory."""
    (tmp_path / "sys" / "class" / "infiniband").mkdir(parents=True)
    res = run_cli("agent", "--source", "sysfs", "--sysfs-root", str(tmp_path / "sys" / "class"),
                  "--once", "--node-id", "n1")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert f"give {tmp_path / 'sys' / 'class' / 'infiniband'}, or the sysfs mount" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_drain_and_resume_take_several_nodes_and_space_separated_lists():
    """`drain gpu0063 gpu0064` was "unrecognized arguments: gpu0064", and `drain 'gpu0001
    gpu0002'` "unknown node(s) gpu0001 gpu0002", which read as two unknown nodes (a
    newcomer's scripts): both are one list."""
    from fleetdeck.cli import _hostlist, build_parser

    args = build_parser().parse_args(["drain", "gpu0063", "gpu[0064-0065]", "--reason", "x"])
    assert _hostlist(args.hostlist) == "gpu0063,gpu[0064-0065]"
    args = build_parser().parse_args(["resume", "gpu0001 gpu0002"])
    assert _hostlist(args.hostlist) == "gpu0001,gpu0002"
    assert _hostlist(["gpu[0001-0003,0005],", "gpu0009"]) == "gpu[0001-0003,0005],gpu0009"


def test_status_leaves_its_links_reconnect_warnings_to_info():
    """Three "WARNING fleetdeck.transport: …" lines came before status's own summary of a lost
    broker (a newcomer's run); a daemon keeps them. On the command's stderr only: the logger
    itself is left as it was (a level outlived the command in this process and silenced the
    TUI's notices in a later test: CI)."""
    import logging

    from fleetdeck.logs import setup_logging

    transport = logging.getLogger("fleetdeck.transport")
    root = logging.getLogger()
    saved = (root.level, list(root.handlers))

    def shown(level: int) -> bool:
        record = transport.makeRecord(transport.name, level, __file__, 1, "retrying", (), None)
        return all(h.filter(record) for h in root.handlers)

    try:
        setup_logging("warning", one_shot=True, says_its_link=True)
        assert not shown(logging.WARNING) and shown(logging.ERROR)
        assert transport.level == logging.NOTSET
        setup_logging("info", one_shot=True, says_its_link=True)
        assert shown(logging.WARNING)
        setup_logging("warning", one_shot=False)
        assert shown(logging.WARNING)
    finally:
        root.setLevel(saved[0])
        root.handlers[:] = saved[1]


def test_a_mistyped_environment_variable_is_named_with_the_one_meant(monkeypatch, tmp_path):
    """FLEETDECK_BROKR was ignored without a word: the command went to the default broker."""
    monkeypatch.setenv("FLEETDECK_BROKR", f"mqtt://127.0.0.1:{free_port()}")
    monkeypatch.setenv("FLEETDECK_NONSENSE", "1")
    res = run_cli("events", "--db", str(tmp_path / "none.db"))
    assert res.stderr.splitlines()[:2] == [
        "fleetdeck events: $FLEETDECK_BROKR is not a fleetdeck setting (did you mean "
        "FLEETDECK_BROKER?); it is ignored.",
        "fleetdeck events: $FLEETDECK_NONSENSE is not a fleetdeck setting; it is ignored."]


def test_every_setting_the_agent_reads_from_the_environment_is_known():
    from agents.config import ENV_PREFIX, AgentSettings
    from fleetdeck.environment import KNOWN, PREFIX, unknown_variables

    assert ENV_PREFIX == PREFIX
    read = {PREFIX + name.upper() for name in AgentSettings.model_fields}
    assert read <= KNOWN
    assert unknown_variables(dict.fromkeys(KNOWN, "x")) == []


def test_since_written_as_minus_a_span_means_that_long_ago(tmp_path):
    """``--since -5m`` (journalctl's way) read "expected one argument"."""
    for since in ("-5m", "-90s"):
        res = run_cli("events", "--db", str(tmp_path / "none.db"), "--since", since)
        assert res.stderr == (f"fleetdeck events: no store at {tmp_path / 'none.db'} (run "
                              "'fleetdeck collect' or the console first, or pass --db FILE).\n")


def test_parse_since_reads_a_leading_minus_as_ago():
    from console.cli.history import parse_since
    from fleetdeck.errors import UserError

    assert parse_since("-5m", 1000.0) == parse_since("5m", 1000.0) == 700.0
    with pytest.raises(UserError, match="neither a span"):
        parse_since("+5m", 1000.0)


def test_since_takes_a_clock_time_as_the_views_show_it():
    """``--since 18:40`` (the views show UTC clock times) was refused as "neither a span … nor
    an ISO time": the latest such time, today or yesterday, UTC."""
    from datetime import UTC, datetime

    from console.cli.history import parse_since

    now = datetime(2026, 12, 5, 19, 0, tzinfo=UTC).timestamp()
    assert parse_since("18:40", now) == datetime(2026, 12, 5, 18, 40, tzinfo=UTC).timestamp()
    assert parse_since("18:40:30", now) == now - 19.5 * 60
    assert parse_since("19:00", now) == now
    # Not come yet today: yesterday's.
    assert parse_since("19:30", now) == datetime(2026, 12, 4, 19, 30, tzinfo=UTC).timestamp()
    assert parse_since("7:05", now) == datetime(2026, 12, 5, 7, 5, tzinfo=UTC).timestamp()
    # A few minutes ahead is a clock a little off (or a time just read): now, not a day back.
    assert parse_since("19:05", now) == now


@pytest.mark.parametrize(("since", "said"), [
    ("99999999d", "--since '99999999d' reaches back more than 10 years: give a shorter span "
                  "or an ISO time."),
    ("1969-07-20T20:17", "--since '1969-07-20T20:17' reaches back before 1970-01-01 (the "
                         "epoch): give a later time."),
    ("25:00", "--since '25:00' is neither a span like 1h/30m/7d, a UTC clock time like 18:40, "
              "nor an ISO time."),
])
def test_since_too_far_back_or_no_time_is_one_sentence(since, said, tmp_path):
    """``--since 99999999d`` was taken in silence (a time before the epoch)."""
    res = run_cli("events", "--db", str(tmp_path / "none.db"), "--since", since)
    assert res.returncode == 2
    assert res.stderr == f"fleetdeck events: {said}\n"


def test_since_may_not_reach_before_the_epoch():
    from console.cli.history import parse_since
    from fleetdeck.errors import UserError

    with pytest.raises(UserError, match="before 1970-01-01"):
        parse_since("1h", 1000.0)


def test_the_command_help_says_how_long_the_broker_test_is_waited_for(monkeypatch):
    """drain/resume/restart-job --help said exit 5 meant "nothing reached the nodes" and that a
    command waits for the broker test's verdict "up to 10 s after it was sent" (a literal):
    the CLI waits up to the test's wait and a second past --timeout, and exit 5 is a
    likelihood said at the deadline (console/cli/commands.py)."""
    import argparse

    from fleetdeck import cli
    from fleetdeck.console import publish_probe

    monkeypatch.setattr(publish_probe, "PROBE_WAIT_S", 7.0)
    sub = next(a for a in cli.build_parser()._actions
               if isinstance(a, argparse._SubParsersAction))
    for command in ("drain", "resume", "restart-job"):
        text = " ".join(sub.choices[command].format_help().split())
        assert "5 timed out with nothing answered, and the broker most likely dropped it" in text
        assert "did not come back within 7 s either" in text, text
        assert "waits for the test's verdict, at most 8 s more" in text, text
        # A drain that took but still drains is its own status (console/cli/commands.py).
        assert "6 (drain) timed out with every target DRAINED or acknowledged and still " \
            "DRAINING" in text, text
        assert "nothing reached the nodes" not in text


@pytest.mark.parametrize("choices", ["'demo', 'status', 'drain'", "demo, status, drain"])
def test_a_mistyped_command_is_matched_whichever_way_argparse_lists_the_choices(choices):
    """Python 3.11 quotes argparse's choices, newer ones do not: 'did you mean' either way."""
    from fleetdeck.cli import Parser

    said = Parser(prog="fleetdeck").what_to_do(
        f"argument COMMAND: invalid choice: 'stauts' (choose from {choices})")
    assert said == "unknown command 'stauts': did you mean 'status'?"


@pytest.mark.parametrize(("args", "said"), [
    (["--json", "status"], "fleetdeck status: --json goes after the command status: "
                           "fleetdeck status --json (see 'fleetdeck status --help')."),
    (["--cluster", "x", "drain", "gpu1", "--reason", "a b"],
     "fleetdeck: --cluster x goes after the command drain: fleetdeck drain gpu1 --reason "
     "'a b' --cluster x (see 'fleetdeck --help')."),
])
def test_a_commands_option_given_before_the_command_says_where_it_goes(args, said):
    """'fleetdeck --json status' read "--json is no option of fleetdeck status: did you mean
    --json?", and 'fleetdeck --cluster x drain …' "unknown command 'x'"."""
    res = run_cli(*args)
    assert (res.returncode, res.stdout, res.stderr.strip()) == (2, "", said)


@pytest.mark.parametrize(("args", "said"), [
    (["status", "--log-level", "debug", "--wait", "1"],
     "fleetdeck status: --log-level goes before the command status: fleetdeck --log-level "
     "debug status --wait 1 (see 'fleetdeck status --help')."),
    (["drain", "gpu1", "--reason", "a b", "--log-level=info"],
     "fleetdeck drain: --log-level goes before the command drain: fleetdeck --log-level=info "
     "drain gpu1 --reason 'a b' (see 'fleetdeck drain --help')."),
])
def test_fleetdecks_own_option_given_after_the_command_says_where_it_goes(args, said):
    """'fleetdeck status --log-level debug' read "unrecognized arguments: --log-level debug",
    and --log-level said nothing of itself in 'fleetdeck --help' (a newcomer's run)."""
    from fleetdeck.cli import build_parser

    res = run_cli(*args)
    assert (res.returncode, res.stdout, res.stderr.strip()) == (2, "", said)
    level = next(a for a in build_parser()._actions if "--log-level" in a.option_strings)
    assert level.help and "before the command" in level.help


def test_command_key_help_says_which_commands_sign_with_it():
    """record and inject take --command-key (a script may pass it to every command) but sign
    nothing: their help said "sign commands with this key" (a newcomer's reading)."""
    import argparse

    from fleetdeck.cli import build_parser

    subs = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    helps = {name: next((a.help for a in sub._actions if a.dest == "command_key"), None)
             for name, sub in subs.choices.items()}
    for name in ("record", "inject"):
        assert str(helps[name]).startswith("accepted, not used: "), (name, helps[name])
    for name in ("console", "serve", "status", "drain", "resume", "restart-job", "retire",
                 "collect"):
        assert str(helps[name]).startswith("sign commands with this key"), (name, helps[name])


def test_a_command_key_from_the_environment_that_cannot_be_read_names_the_variable(
        monkeypatch, tmp_path):
    """A cron's ``status`` that never gave --command-key read "cannot read command key …" of a
    file it did not know it had: the sentence says where the path came from, as the TLS files'
    do."""
    monkeypatch.setenv("FLEETDECK_COMMAND_KEY_FILE", str(tmp_path / "gone.key"))
    # status only watches: it goes on unsigned, saying so once, to the broker's own answer
    # (here none: exit 2 for the broker, not for the key it never asked for).
    watch = run_cli("status", "--wait", "1", "--broker", "mqtt://127.0.0.1:9")
    lines = watch.stderr.strip().splitlines()
    assert watch.returncode == 2 and len(lines) == 2, watch.stderr
    assert lines[0] == (
        f"fleetdeck: cannot read command key {tmp_path}/gone.key: No such file or directory "
        "(from $FLEETDECK_COMMAND_KEY_FILE); watching unsigned (agents that obey only signed "
        "commands answer no keyframe ask: nodes they run may read waiting until their "
        "periodic keyframe)."), watch.stderr
    assert "127.0.0.1:9" in lines[1] and "command key" not in lines[1], watch.stderr
    for command in (["retire", "gpu0001"], ["serve"]):
        res = run_cli(*command, "--broker", "mqtt://127.0.0.1:9")
        assert res.returncode == 2, res.stderr
        assert res.stderr.strip().splitlines() == [
            f"fleetdeck {command[0]}: cannot read command key {tmp_path}/gone.key: No such file "
            "or directory (from $FLEETDECK_COMMAND_KEY_FILE)."], res.stderr
    given = run_cli("status", "--wait", "1", "--broker", "mqtt://127.0.0.1:9",
                    "--command-key", str(tmp_path / "other.key"))
    assert "(from $" not in given.stderr and "other.key" in given.stderr, given.stderr
