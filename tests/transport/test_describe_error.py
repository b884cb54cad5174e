"""The sentence an unreachable broker gets: the OS's errno wording never reaches the operator."""

import socket
import subprocess

import pytest

from fleetdeck.brokerurl import describe_mqtt_error, parse_broker_url
from tests.security.deploy import DEPLOY, needs_tools


@pytest.mark.parametrize(("err", "words"), [
    (ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 36343)"),
     "connection refused (is it running?)"),
    (socket.gaierror(-2, "Name or service not known"),
     "the host name 'nosuchhost.invalid' does not resolve"),
    (socket.gaierror(-3, "Temporary failure in name resolution"),
     "the host name 'nosuchhost.invalid' does not resolve"),
    # Not every failed connect is a refusal: a firewalled host is no broker that is down.
    (OSError(113, "Connect call failed ('10.0.0.1', 1883)"), ": no route to host."),
    (OSError(101, "Connect call failed ('10.0.0.1', 1883)"), ": network is unreachable."),
])
def test_errno_words_become_a_sentence(err, words):
    url = parse_broker_url("mqtt://nosuchhost.invalid:1883")
    text = describe_mqtt_error(url, err)
    assert words in text and "Errno" not in text and text.endswith(".")


def test_the_sentence_goes_inside_parentheses_without_its_full_stop():
    """The drain dialog read "(…: connection refused (is it running?).): this is sent …"."""
    from fleetdeck.transport import Connection

    url = parse_broker_url("mqtt://127.0.0.1:1")
    detail = describe_mqtt_error(url, ConnectionRefusedError(111, "Connect call failed"))
    conn = Connection("disconnected", detail)
    assert f"({conn.why})".endswith("(is it running?))")
    assert Connection("disconnected").why == "disconnected"


def test_a_port_that_is_not_an_mqtt_broker_gets_one_sentence_and_no_library_traceback():
    """`python -m http.server` on the broker's port: gmqtt read its "HTTP/1.0 400" as a CONNACK
    and logged two tracebacks before "cannot talk to the MQTT broker …: code 104 (Unknown
    error)" (a newcomer's scripts)."""
    import threading
    import time

    from tests.conftest import run_cli

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    port = srv.getsockname()[1]
    stop = threading.Event()

    def answer_http() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            with conn:
                conn.recv(1024)
                conn.sendall(b"HTTP/1.0 400 Bad request\r\nContent-Length: 0\r\n\r\n")
                time.sleep(0.5)  # the reply read before the close, as http.server's

    t = threading.Thread(target=answer_http, daemon=True)
    t.start()
    try:
        out = run_cli("status", "--json", "--broker", f"mqtt://127.0.0.1:{port}",
                      timeout=60)
    finally:
        stop.set()
        t.join(5)
        srv.close()
    assert out.returncode == 2
    # Which sentence depends on whether the reply or the close is read first.
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    [line] = lines
    assert line in (
        f"fleetdeck status: the server at mqtt://127.0.0.1:{port} did not answer as an MQTT "
        "broker (another service on that port?).",
        f"fleetdeck status: cannot talk to the MQTT broker at mqtt://127.0.0.1:{port}: the "
        f"broker closed the connection before accepting it (if port {port} is the broker's "
        "TLS listener, use mqtts:// with --ca)."), out.stderr


def test_a_connack_code_mqtt_does_not_have_is_another_service():
    from gmqtt.mqtt.handler import MQTTConnectError

    url = parse_broker_url("mqtt://127.0.0.1:8000")
    assert describe_mqtt_error(url, MQTTConnectError(104)) == (
        "the server at mqtt://127.0.0.1:8000 did not answer as an MQTT broker (another service "
        "on that port?).")


def test_the_default_broker_is_said_to_be_the_default(monkeypatch):
    """A newcomer with no --broker and no $FLEETDECK_BROKER read "cannot reach the MQTT broker
    at mqtt://127.0.0.1:1883: connection refused" and never knew where that address came from."""
    from fleetdeck.brokerurl import broker_from_env

    monkeypatch.delenv("FLEETDECK_BROKER", raising=False)
    url = broker_from_env(None)
    text = describe_mqtt_error(url, ConnectionRefusedError(111, "Connect call failed"))
    assert text == ("cannot reach the MQTT broker at mqtt://127.0.0.1:1883 (the default: no "
                    "--broker, and $FLEETDECK_BROKER is not set): connection refused (is it "
                    "running?).")
    assert url == parse_broker_url("mqtt://127.0.0.1:1883")  # the same broker, just told apart


@pytest.mark.parametrize("how", ["flag", "env"])
def test_a_chosen_broker_is_not_called_the_default(monkeypatch, how):
    from fleetdeck.brokerurl import broker_from_env

    monkeypatch.delenv("FLEETDECK_BROKER", raising=False)
    if how == "env":
        monkeypatch.setenv("FLEETDECK_BROKER", "mqtt://127.0.0.1:1883")
    url = broker_from_env("mqtt://127.0.0.1:1883" if how == "flag" else None)
    text = describe_mqtt_error(url, ConnectionRefusedError(111, "Connect call failed"))
    assert "default" not in text


@needs_tools
def test_a_refused_client_certificate_reads_as_one_sentence(tmp_path):
    """A TLS EOF with --cert ended "is it signed by the CA the broker trusts, and not
    expired?." (the hint's question, then the sentence's full stop)."""
    import errno
    import ssl

    from fleetdeck.brokerurl import with_tls
    from fleetdeck.transport import TransportError

    # Real files: their contents are checked when the URL is read
    # (tests/security/test_tls_file_contents.py).
    subprocess.run(["bash", str(DEPLOY / "mkcerts.sh"), str(tmp_path), "broker", "c"],
                   check=True, capture_output=True, timeout=60)
    url = with_tls(parse_broker_url("mqtts://127.0.0.1:8883"), str(tmp_path / "ca.crt"),
                   str(tmp_path / "c.crt"), str(tmp_path / "c.key"))
    hint = ("if port 8883 is plain MQTT use mqtt://, or the broker's TLS port; else the broker "
            f"refused --cert {tmp_path / 'c.crt'}: check that it is signed by the CA the broker "
            "trusts and has not expired")
    eof = ssl.SSLEOFError(8, "EOF occurred in violation of protocol (_ssl.c:2426)")
    assert describe_mqtt_error(url, eof) == (
        "TLS with the MQTT broker at mqtts://127.0.0.1:8883 failed (EOF occurred in violation "
        f"of protocol (_ssl.c:2426)); {hint}.")
    for err in (ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"),
                TransportError("the broker closed the connection before accepting it")):
        text = describe_mqtt_error(url, err)
        assert text.endswith(f" ({hint})."), text


def test_a_refused_connection_names_a_demo_running_here():
    """A newcomer with `make demo` in one terminal typed `fleetdeck status` in another without
    the demo's URL (or with its port one digit off) and read only "connection refused (is it
    running?)": the demo's broker URL is the thing to type."""
    from fleetdeck.paths import mark_demo_broker, state_base

    run = state_base() / "demo-20261207T030000"
    run.mkdir(parents=True)
    mark = mark_demo_broker(run, "127.0.0.1", 27001, "demo")  # held: the demo is running
    refused = ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 1883)")
    try:
        assert describe_mqtt_error(parse_broker_url("mqtt://127.0.0.1:27011"), refused) == (
            "cannot reach the MQTT broker at mqtt://127.0.0.1:27011: connection refused; a "
            "demo's broker runs here at mqtt://127.0.0.1:27001: give --broker "
            "mqtt://127.0.0.1:27001 (or export FLEETDECK_BROKER=mqtt://127.0.0.1:27001).")
        # A real broker refusing (another host, TLS, a user) is no demo's URL mistyped: the
        # on-call's `status` must not be sent to a drill's broker.
        for real in ("mqtt://10.0.0.5:1883", "mqtts://127.0.0.1:8883",
                     "mqtt://ops:pw@127.0.0.1:1883"):
            assert describe_mqtt_error(parse_broker_url(real), refused).endswith(
                "connection refused (is it running?)."), real
        # The demo's own broker refusing is no other URL to give.
        assert describe_mqtt_error(parse_broker_url("mqtt://127.0.0.1:27001"), refused).endswith(
            "connection refused (is it running?).")
    finally:
        mark.close()
    # A demo gone (its mark unlocked or removed) is named no more.
    assert describe_mqtt_error(parse_broker_url("mqtt://127.0.0.1:27011"), refused).endswith(
        "connection refused (is it running?).")


@pytest.mark.parametrize(("url", "said"), [
    # As the demo's header shows its broker: the URL to type (a newcomer's 3 a.m. run).
    ("127.0.0.1:41234", "broker URL '127.0.0.1:41234' must start with mqtt:// or mqtts://: "
                        "did you mean mqtt://127.0.0.1:41234?"),
    ("tcp://h:1", "broker URL 'tcp://h:1' must start with mqtt:// or mqtts://: did you mean "
                  "mqtt://h:1?"),
    ("mqtt//127.0.0.1:1883", "broker URL 'mqtt//127.0.0.1:1883' must start with mqtt:// or "
                             "mqtts://: did you mean mqtt://127.0.0.1:1883?"),
    ("mqtts:/b:8883", "broker URL 'mqtts:/b:8883' has no host name: did you mean "
                      "mqtts://b:8883?"),
    # The host left out: it offered mqtt://1883, a host named 1883 (an audit).
    ("mqtt://:1883", "broker URL 'mqtt://:1883' has no host name: did you mean "
                     "mqtt://127.0.0.1:1883?"),
    ("mqtts:/:8883", "broker URL 'mqtts:/:8883' has no host name: did you mean "
                     "mqtts://127.0.0.1:8883?"),
    # An ESC typed into the host was sent to the terminal, "'127.0.0.1' does not resolve".
    ("mqtt://127.0.0.1\x1b:1883", "the broker URL's host name '127.0.0.1\\x1b' holds a space "
                                  "or a control character: retype it (e.g. "
                                  "mqtt://127.0.0.1:1883)."),
    # No host[:port] left to offer, or a password the suggestion would drop: the example.
    ("garbage::", "broker URL 'garbage::' must start with mqtt:// or mqtts:// (e.g. "
                  "mqtt://127.0.0.1:1883)."),
    ("bob:hunter2@h:1", "broker URL 'bob@h:1' must start with mqtt:// or mqtts:// (e.g. "
                        "mqtt://127.0.0.1:1883)."),
])
def test_a_url_without_its_scheme_says_the_url_meant(url, said):
    from fleetdeck.errors import UserError

    with pytest.raises(UserError) as err:
        parse_broker_url(url)
    assert str(err.value) == said


@pytest.mark.parametrize("url", [
    "mqtt://bob:p@ss3@h:1/x", "bob:p@ss3@h:1", "tcp://bob:p@ss3@h:1", "mqtt://bob:hu/nt3@h:1",
    "bob:hu/nt3@h:1", "mqtt://bob:hu/nt3@h:1/x", "mqtt:/bob:nt3@h:1",
])
def test_a_password_with_an_unencoded_at_or_slash_is_never_shown_in_part(url):
    """'p@ss3' was shown 'ss3' ('mqtt://bob@ss3@h:1/x'), and 'hu/nt3' as the port 'hu' or
    whole: the sentence goes to terminals and logs."""
    from fleetdeck.errors import UserError

    with pytest.raises(UserError) as err:
        parse_broker_url(url)
    said = str(err.value)
    assert "ss3" not in said and "nt3" not in said and "'hu'" not in said, said
