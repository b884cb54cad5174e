"""Values argparse lets through as numbers but that no command can use (NaN, infinity, beyond
the protocol's bounds), and config files that are not text: one plain sentence, exit 2, never a
hang or a traceback (found in failure drills: `status --wait nan` never returned, `sim
--interval nan` killed every agent task with a ValidationError)."""

import pytest

from tests.conftest import run_cli


def _one_sentence(res, needle: str) -> None:
    assert res.returncode == 2, res.stderr
    assert needle in res.stderr
    assert "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["status", "--wait", "nan"], "--wait must be a finite number"),
        (["status", "--wait", "inf"], "--wait must be a finite number"),
        (["drain", "gpu0001", "--reason", "x", "--timeout", "nan"],
         "--timeout must be a finite number"),
        (["sim", "--interval", "nan"], "--interval must be a finite number"),
        (["sim", "--interval", "99999"], "--interval must be at most 3600"),
        (["sim", "--keepalive", "99999"], "--keepalive must be at most 3600"),
        (["agent", "--interval=-inf", "--once"], "--interval must be a finite number"),
        # "must be <= 10000" of nan (a CLI fuzz round): say it is no number.
        (["agent", "--expect-ib-rate", "nan", "--check-config"],
         "--expect-ib-rate: Input should be a finite number"),
        # An extra 0 typed: one sentence, not the machine swapping (found in a drill: the
        # simulator built its world silently until the OOM killer came; the demo showed an
        # empty console, the refusal in a log nobody reads).
        (["sim", "--nodes", "100000000"], "needs about 11.9 TiB of memory"),
        (["sim", "--nodes", "100000000", "--out", "/nonexistent/x.jsonl.gz", "--duration",
          "1h"], "needs about 3.7 TiB of memory"),
        (["demo", "--nodes", "100000000"], "needs about 11.9 TiB of memory"),
        (["record", "--out", "/tmp/x.jsonl.gz", "--duration", "nan"],
         "--duration must be finite"),
        (["record", "--out", "/tmp/x.jsonl.gz", "--duration", "soon"],
         "--duration must be a span like 7d, 36h or 90m"),
        # Written with a minus it read "argument --duration: expected one argument", of an
        # argument given (a newcomer's run): what --duration takes, as for any other word.
        (["record", "--out", "/tmp/x.jsonl.gz", "--duration", "-5m"],
         "--duration must be a span like 7d, 36h or 90m, not '-5m'"),
        (["sim", "--out", "/tmp/x.jsonl.gz", "--duration", "-5m"],
         "--duration must be a span like 7d, 36h or 90m, not '-5m'"),
        # Asks that ran "forever" (a CLI fuzz round): bounded, one sentence each.
        (["status", "--wait", "1e300"], "--wait must be at most 86400, not 1e300"),
        (["record", "--out", "/tmp/x.jsonl.gz", "--duration", "99999999999d"],
         "--duration must be at most 366d, not 99999999999d; without it, it runs until"),
        (["replay", "/nonexistent.jsonl", "--headless", "--tick", "1e-9"],
         "--tick must be between 0.01 and 3600, not 1e-9"),
    ],
)
def test_unusable_numbers_are_one_sentence(args, needle):
    _one_sentence(run_cli(*args, timeout=20), needle)


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"\xff\xfeb\x00r\x00o\x00", "is not a UTF-8 text file"),
        (None, "is a directory"),
    ],
)
def test_a_config_that_is_not_a_toml_text_file_is_one_sentence(tmp_path, content, needle):
    cfg = tmp_path / "agent.toml"
    if content is None:
        cfg.mkdir()
    else:
        cfg.write_bytes(content)
    _one_sentence(run_cli("agent", "--config", str(cfg), "--check-config"), needle)


@pytest.mark.parametrize(
    ("url", "needle"),
    [
        ("mqtt://127.0.0.1:0", "port '0' is not a number from 1 to 65535"),
        ("http://bob:hunter2@h:1", "must start with mqtt://"),
        # Without a scheme the password was shown whole (a newcomer's 3 a.m. run).
        ("bob:hunter2@h:1", "broker URL 'bob@h:1' must start with mqtt://"),
        ("mqtt://bob:hunter2@h:1/x", "not a path or query"),
        # "Invalid IPv6 URL" alone: neither the URL nor the fix (a CLI fuzz round).
        ("mqtt://bob:hunter2@[::1", "broker URL 'mqtt://bob@[::1' is not valid: an IPv6 "
         "address goes in brackets, the port after them, as mqtt://[::1]:1883."),
    ],
)
def test_broker_url_errors_never_show_the_password(url, needle):
    res = run_cli("status", "--broker", url, timeout=20)
    assert res.returncode == 2 and needle in res.stderr, res.stderr
    assert "hunter2" not in res.stderr


def test_a_nan_interval_in_the_config_is_called_not_finite(tmp_path):
    cfg = tmp_path / "agent.toml"
    cfg.write_text("interval_s = nan\n")
    res = run_cli("agent", "--config", str(cfg), "--check-config")
    assert res.returncode == 2 and "finite number" in res.stderr, res.stderr


@pytest.mark.parametrize(
    ("env", "args", "needle"),
    [
        ({"FLEETDECK_BROKER": ""}, [], "$FLEETDECK_BROKER is set but empty"),
        ({"FLEETDECK_BROKER": "garbage::"}, [],
         "$FLEETDECK_BROKER: broker URL 'garbage::' must start with mqtt://"),
        ({"FLEETDECK_CA": "/nonexistent/ca.pem"}, ["--broker", "mqtts://127.0.0.1:8883"],
         "$FLEETDECK_CA /nonexistent/ca.pem: no such file."),
        ({}, ["--broker", "mqtts://127.0.0.1:8883", "--ca", "/tmp"],
         "--ca /tmp is a directory, not a file."),
        ({"FLEETDECK_CA": "/etc/hostname"}, ["--broker", "mqtt://127.0.0.1:1"],
         "TLS files ($FLEETDECK_CA) need an mqtts:// broker URL"),
        ({"FLEETDECK_CERT": "/etc/hostname"}, ["--broker", "mqtts://127.0.0.1:1"],
         "$FLEETDECK_CERT and $FLEETDECK_KEY go together"),
    ],
)
def test_a_bad_setting_names_where_it_came_from(env, args, needle, monkeypatch, capsys):
    """A wrong variable was reported as a flag never typed ("--ca /nonexistent"), a garbage
    $FLEETDECK_BROKER without its name, an empty one read as the default broker, and a
    directory given as --ca as "no such file" (an SRE drill)."""
    from fleetdeck.cli import main

    for name in ("FLEETDECK_BROKER", "FLEETDECK_CA", "FLEETDECK_CERT", "FLEETDECK_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["status", *args]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1, err


def test_record_takes_a_span_as_sim_does():
    """`record --duration 1m` was refused as not a number while `sim --duration 7d` and
    `--since 1h` take spans (a newcomer's run): it now reaches the broker."""
    res = run_cli("record", "--out", "/tmp/never.jsonl.gz", "--duration", "1m", "--broker",
                  "mqtt://127.0.0.1:1", timeout=20)
    assert res.returncode == 2 and "cannot reach the MQTT broker" in res.stderr, res.stderr


def test_a_bad_cluster_from_the_environment_names_the_variable(monkeypatch, capsys):
    """"argument --cluster: …" was said of a flag nobody gave (a newcomer's run)."""
    from fleetdeck.cli import main

    monkeypatch.setenv("FLEETDECK_CLUSTER", "b a d")
    with pytest.raises(SystemExit) as ended:
        main(["status"])
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert "cluster 'b a d'" in err and "(from $FLEETDECK_CLUSTER)" in err
    assert err.count("\n") == 1


@pytest.mark.parametrize("argv", [["console", "--db", "{missing}/x.db"],
                                  ["console", "--audit-log", "{missing}/a.jsonl"],
                                  ["collect", "--db", "{missing}/x.db"],
                                  ["resume", "gpu0001", "--audit-log", "{missing}/a.jsonl"]])
def test_a_file_in_a_folder_that_does_not_exist_is_refused_not_made(tmp_path, argv):
    """``console --db /nonexistent/dir/x.db`` made /nonexistent/dir at the root (a newcomer's
    run), where ``record --out`` refused the same."""
    missing = tmp_path / "no" / "such"
    res = run_cli(*[a.format(missing=missing) for a in argv], "--broker", "mqtt://127.0.0.1:1")
    _one_sentence(res, f"folder {missing} does not exist")
    assert not missing.exists()


async def test_an_events_limit_beyond_sqlite_is_one_sentence(tmp_path):
    """``events --limit 18446744073709551616`` reached SQLite and ended in aiosqlite's
    OverflowError traceback (a CLI audit): bounded, one sentence."""
    from fleetdeck.console.store import Store

    store = tmp_path / "demo.db"
    await (await Store.open(store)).close()
    _one_sentence(run_cli("events", "--db", str(store), "--limit", str(2**64)),
                  "--limit must be at most 1,000,000,000, not 18446744073709551616")


@pytest.mark.parametrize("url", ["javascript:alert(document.cookie)", "ftp://fleet.example",
                                 "fleet.example.com", "http://", "http://[::1",
                                 "https://fleet\x1b.example"])
def test_serve_takes_only_an_http_public_url(url, capsys):
    """``serve --public-url 'javascript:…'`` was taken, to be written into each page served
    (a CLI fuzz round): only an http(s) URL with a host is, one sentence else, escaped."""
    from fleetdeck.cli import build_parser

    with pytest.raises(SystemExit) as done:  # the parser alone: never a server started
        build_parser().parse_args(["serve", "--public-url", url])
    err = capsys.readouterr().err
    assert done.value.code == 2 and len(err.strip().splitlines()) == 1, err
    assert "--public-url must be the http:// or https:// URL browsers use" in err, err
    assert "\x1b" not in err and "Traceback" not in err


def test_serve_takes_an_https_public_url_behind_a_proxy():
    from fleetdeck.cli import build_parser

    url = "https://fleet.example.com:8443/console"
    assert build_parser().parse_args(["serve", "--public-url", url]).public_url == url


@pytest.mark.parametrize(("argv", "needle"), [
    (["status", "--broker", "mqtts://127.0.0.1:8883", "--ca", "{fifo}"],
     "--ca {fifo} is a named pipe (FIFO), not a regular file."),
    (["agent", "--config", "{fifo}", "--check-config"],
     "config file {fifo} is a named pipe (FIFO), not a regular file."),
    (["sim", "--scenario", "{fifo}"],
     "scenario file '{fifo}' is a named pipe (FIFO), not a regular file"),
    (["sim", "--scenario", "{dir}/"], "scenario file '{dir}/' is a directory, not a file"),
    # "{dir} already exists; … pass --force to overwrite that recording" (and with --force
    # "cannot write {dir}: Is a directory"): what it is, said once.
    (["sim", "--out", "{dir}", "--duration", "1h", "--force"],
     "--out {dir} is a directory, not a file: give it a recording's file name"),
    (["record", "--out", "{dir}", "--broker", "mqtt://127.0.0.1:9"],
     "--out {dir} is a directory, not a file: give it a recording's file name"),
])
def test_a_file_flag_given_a_fifo_or_a_directory_says_what_it_is(argv, needle, tmp_path,
                                                                  monkeypatch, capsys):
    """--ca, --config and --scenario given a FIFO said "no such file" / "does not exist", and
    --scenario given a directory "not found" (a CLI fuzz round): each says what it is."""
    import os

    from fleetdeck.cli import main

    for name in ("FLEETDECK_BROKER", "FLEETDECK_CA", "FLEETDECK_CERT", "FLEETDECK_KEY"):
        monkeypatch.delenv(name, raising=False)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    paths = {"fifo": str(fifo), "dir": str(tmp_path)}
    assert main([a.format(**paths) for a in argv]) == 2
    err = capsys.readouterr().err
    assert needle.format(**paths) in err and err.count("\n") == 1, err


@pytest.mark.parametrize("command", ["broker", "serve"])
@pytest.mark.parametrize("bind", ["", " ", "127.0.0.1 ", "\x1b"])
def test_a_blank_bind_address_is_refused_at_once(command, bind, capsys):
    """``broker --bind ''`` waited 15 s for a broker that never listened, then failed (a CLI
    fuzz round): refused before anything starts, in one sentence."""
    from fleetdeck.cli import build_parser

    with pytest.raises(SystemExit) as done:  # the parser alone: never a server started
        build_parser().parse_args([command, "--bind", bind])
    err = capsys.readouterr().err
    assert done.value.code == 2 and len(err.strip().splitlines()) == 1, err
    assert "--bind must be an address to listen on, as 127.0.0.1" in err and "\x1b" not in err


@pytest.mark.parametrize("command", [["status", "--wait", "1"], ["console"]])
def test_an_unreadable_tls_file_is_refused_naming_it(tmp_path, command):
    """A CA the user may not read said "cannot load TLS files for mqtts://…: [Errno 13]
    Permission denied" naming no file, and the console opened its screen on it: refused at
    the start, as a missing or a directory one is."""
    import os
    import shutil
    import subprocess

    from tests.conftest import REPO, fleetdeck_cmd

    ca = tmp_path / "ca.pem"
    ca.write_text("x\n")
    ca.chmod(0)
    prefix: list[str] = []
    if os.geteuid() == 0:  # root reads any file: drop what lets it
        if shutil.which("setpriv") is None:
            pytest.skip("root without setpriv reads any file")
        prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
    res = subprocess.run([*prefix, *fleetdeck_cmd(*command, "--broker", "mqtts://127.0.0.1:9",
                                                  "--ca", str(ca))],
                         capture_output=True, text=True, timeout=60, cwd=REPO, check=False,
                         stdin=subprocess.DEVNULL)
    _one_sentence(res, f"--ca {ca}: cannot be read (permission denied).")


@pytest.mark.parametrize("kind", ["dir", "unreadable"])
def test_a_store_that_is_no_readable_file_is_refused_before_the_screen(tmp_path, kind):
    """``console --db`` a directory, or a file the user may not read, opened the screen and
    kept no history (SQLite's "unable to open database file" in a notification); the
    one-shot commands said the same words of both. One sentence before anything opens."""
    import os
    import shutil
    import subprocess

    from tests.conftest import REPO, fleetdeck_cmd

    db = tmp_path / "s.db"
    prefix: list[str] = []
    if kind == "dir":
        db.mkdir()
        needle = f"the history store {db} is a directory, not a file"
    else:
        db.write_bytes(b"")
        db.chmod(0)
        needle = f"cannot open the history store {db}: permission denied."
        if os.geteuid() == 0:
            if shutil.which("setpriv") is None:
                pytest.skip("root without setpriv reads any file")
            prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
    for command in (["console", "--broker", "mqtt://127.0.0.1:9"], ["events"]):
        res = subprocess.run([*prefix, *fleetdeck_cmd(*command, "--db", str(db))],
                             capture_output=True, text=True, timeout=60, cwd=REPO,
                             check=False, stdin=subprocess.DEVNULL)
        _one_sentence(res, needle)


def test_an_unreadable_scenario_is_said_in_words(tmp_path):
    """``sim --scenario`` a file the user may not read said "cannot read scenario '…':
    [Errno 13] Permission denied: '…'", the path twice and an errno: the reason alone."""
    import os
    import shutil
    import subprocess

    from tests.conftest import REPO, fleetdeck_cmd

    toml = tmp_path / "s.toml"
    toml.write_text("")
    toml.chmod(0)
    prefix: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root without setpriv reads any file")
        prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
    res = subprocess.run([*prefix, *fleetdeck_cmd("sim", "--scenario", str(toml))],
                         capture_output=True, text=True, timeout=60, cwd=REPO, check=False,
                         stdin=subprocess.DEVNULL)
    _one_sentence(res, f"cannot read scenario '{toml}': permission denied.")
    assert "Errno" not in res.stderr


def test_a_store_or_recording_through_a_link_to_no_file_yet_is_made(tmp_path):
    """A store kept on a bigger disk through a link made before its first run (the target's
    folder there, the file not yet): SQLite makes the target, as it did, but the up-front
    path check read the dangling link as "does not exist" and refused the path it would
    have made; ``record --out`` through such a link alike."""
    import asyncio

    from fleetdeck.console.store import Store, path_problem
    from fleetdeck.paths import recording_out

    (tmp_path / "disk").mkdir()
    db = tmp_path / "s.db"
    db.symlink_to(tmp_path / "disk" / "s.db")
    assert path_problem(db) == ""

    async def make() -> None:
        store = await Store.open(db)
        await store.close()

    asyncio.run(make())
    assert (tmp_path / "disk" / "s.db").is_file()
    out = tmp_path / "r.jsonl"
    out.symlink_to(tmp_path / "disk" / "r.jsonl")
    assert recording_out(str(out)) == out
