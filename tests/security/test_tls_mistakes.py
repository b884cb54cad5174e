"""The TLS mistakes an SRE makes against the shipped broker setup (deploy/mosquitto), each told
in one sentence that names what to fix: a TLS port given as mqtt://, a plain port as mqtts://,
a host name the certificate does not hold, no --ca, an expired or not-yet-valid broker
certificate, and a client certificate the broker requires, or refuses (mutual TLS).

Both clients are checked: gmqtt (``fleetdeck status``, the console) and aiomqtt (the agent:
``make_client``), whose connect used to wait out its whole timeout and then say "did not
answer in time" for a broker that had refused the client certificate at once."""

import contextlib
import os
import select
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import aiomqtt
import paho.mqtt.client as paho
import pytest

from fleetdeck.broker import MOSQUITTO, ManagedBroker, free_port
from fleetdeck.brokerurl import describe_mqtt_error, make_client, parse_broker_url, with_tls
from tests.conftest import run_cli
from tests.security.deploy import needs_tools

pytestmark = needs_tools


def _sign(pki: Path, name: str, *, server: bool, start: str, end: str) -> tuple[Path, Path]:
    """A certificate from the setup's CA with the given validity (openssl ca sets any dates)."""
    ca = pki / f"ca-{name}"
    ca.mkdir()
    (ca / "index.txt").write_text("")
    (ca / "serial").write_text("1000\n")
    ext = "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth" if server else (
        "extendedKeyUsage=clientAuth")
    (ca / "ca.cnf").write_text(
        f"[ca]\ndefault_ca=c\n[c]\ndatabase={ca}/index.txt\nserial={ca}/serial\n"
        f"new_certs_dir={ca}\ncertificate={pki}/ca.crt\nprivate_key={pki}/ca.key\n"
        "default_md=sha256\npolicy=p\nunique_subject=no\n[p]\ncommonName=supplied\n"
        f"[ext]\n{ext}\n")
    key, csr, crt = pki / f"{name}.key", ca / f"{name}.csr", pki / f"{name}.crt"
    subprocess.run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
                    "-out", str(csr), "-subj", "/CN=127.0.0.1" if server else "/CN=console"],
                   check=True, capture_output=True)
    subprocess.run(["openssl", "ca", "-batch", "-config", str(ca / "ca.cnf"), "-extensions",
                    "ext", "-in", str(csr), "-out", str(crt), "-startdate", start, "-enddate",
                    end], check=True, capture_output=True)
    return crt, key


@pytest.fixture(scope="module")
def odd_certs(secured, tmp_path_factory) -> Iterator[dict[str, int | Path]]:
    """Listeners beside the shipped ones: an expired and a not-yet-valid broker certificate,
    and mutual TLS (``require_certificate``), on one more Mosquitto with the same users."""
    _broker, _creds, _tls, work = secured
    pki = work / "pki"
    expired = _sign(pki, "expired", server=True, start="20200101000000Z", end="20210101000000Z")
    future = _sign(pki, "future", server=True, start="20400101000000Z", end="20410101000000Z")
    _sign(pki, "client-expired", server=False, start="20200101000000Z", end="20210101000000Z")
    ports = {"expired": free_port(), "future": free_port(), "mtls": free_port()}
    conf = (f"per_listener_settings false\nallow_anonymous false\n"
            f"password_file {work / 'passwd'}\npersistence false\n"
            "listener {port} 127.0.0.1\n")
    for which, (crt, key) in (("expired", expired), ("future", future),
                              ("mtls", (pki / "server.crt", pki / "server.key"))):
        conf += (f"listener {ports[which]} 127.0.0.1\ncafile {pki / 'ca.crt'}\n"
                 f"certfile {crt}\nkeyfile {key}\n")
    # Mutual TLS as mosquitto.conf's comment says (the certificate's CN is the user name).
    conf += "require_certificate true\nuse_identity_as_username true\n"
    if os.geteuid() == 0:
        conf = "user root\n" + conf  # as tests/security/deploy.py
    (work / "odd").mkdir()
    with ManagedBroker(MOSQUITTO, workdir=work / "odd", config=conf):
        yield {**ports, "pki": pki}


def _status_error(*args: str) -> str:
    res = run_cli("status", "--wait", "1", *args, timeout=60)
    assert res.returncode == 2, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    return lines[0]


def test_a_tls_port_given_as_mqtt_says_use_mqtts(secured):
    _broker, creds, tls_port, _work = secured
    line = _status_error("--broker", f"mqtt://console:{creds['console']}@127.0.0.1:{tls_port}")
    assert f"if port {tls_port} is the broker's TLS listener, use mqtts:// with --ca" in line
    assert creds["console"] not in line


def test_a_plain_port_given_as_mqtts_says_use_mqtt(secured):
    broker, creds, _tls, work = secured
    line = _status_error("--broker", f"mqtts://console:{creds['console']}@127.0.0.1:"
                         f"{broker.port}", "--ca", str(work / "pki" / "ca.crt"))
    assert f"if port {broker.port} is plain MQTT use mqtt://" in line, line


def test_a_host_name_the_certificate_does_not_hold_is_named(secured):
    _broker, creds, tls_port, work = secured
    line = _status_error("--broker", f"mqtts://console:{creds['console']}@localhost:{tls_port}",
                         "--ca", str(work / "pki" / "ca.crt"))
    assert "the broker's certificate is not for 'localhost'" in line, line


def test_no_ca_for_a_private_ca_says_give_ca(secured):
    _broker, creds, tls_port, _work = secured
    line = _status_error("--broker", f"mqtts://console:{creds['console']}@127.0.0.1:{tls_port}")
    assert "no --ca was given" in line and "give --ca" in line, line


@pytest.mark.parametrize(("which", "words"), [
    ("expired", "the broker's certificate has expired: renew it on the broker"),
    ("future", "the broker's certificate is not valid yet: check this machine's clock"),
])
def test_a_broker_certificate_out_of_its_dates_is_not_blamed_on_ca(secured, odd_certs, which,
                                                                    words):
    """It said "check that --ca is the CA that signed the broker's certificate" for both."""
    _broker, creds, _tls, _work = secured
    line = _status_error("--broker", f"mqtts://console:{creds['console']}@127.0.0.1:"
                         f"{odd_certs[which]}", "--ca", str(odd_certs["pki"] / "ca.crt"))
    assert words in line and "check that --ca" not in line, line


@pytest.mark.parametrize(("cert", "words"), [
    (None, "the broker requires a client certificate: give --cert and --key"),
    ("client-expired", "the broker refused the client certificate (--cert "),
])
async def test_the_agents_client_says_why_the_broker_refused_its_certificate_at_once(
        odd_certs, cert, words):
    """aiomqtt ignored the SSL alert paho read before the CONNACK: the agent's journal said "did
    not answer in time" 10 s later, on every attempt."""
    pki = odd_certs["pki"]
    assert isinstance(pki, Path)
    url = with_tls(parse_broker_url(f"mqtts://127.0.0.1:{odd_certs['mtls']}"),
                   str(pki / "ca.crt"), str(pki / f"{cert}.crt") if cert else None,
                   str(pki / f"{cert}.key") if cert else None)
    started = time.monotonic()
    with pytest.raises(aiomqtt.MqttError) as err:
        async with make_client(url, "gpu0001-mtls", timeout=10):
            pass
    assert time.monotonic() - started < 5, "waited out the connect timeout"
    text = describe_mqtt_error(url, err.value)
    assert words in text and "did not answer in time" not in text, text


class _SlowBroker:
    """A relay to ``port`` whose broker's bytes reach the client 0.2 s late (a loaded broker
    host), and that resets the client once the broker hangs up, as Mosquitto's own close does
    when it refuses a client certificate (the client's last handshake bytes are unread)."""

    def __init__(self, port: int) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._serve, args=(port,), daemon=True).start()

    def _serve(self, port: int) -> None:
        client = self.server.accept()[0]
        self.server.close()
        broker = socket.create_connection(("127.0.0.1", port))
        threading.Thread(target=self._forward, args=(client, broker), daemon=True).start()
        with contextlib.suppress(OSError):
            while data := broker.recv(65536):
                time.sleep(0.2)
                client.sendall(data)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.shutdown(socket.SHUT_RD)  # else _forward's recv holds it open past close()
        client.close()
        broker.close()

    @staticmethod
    def _forward(client: socket.socket, broker: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := client.recv(65536):
                broker.sendall(data)


async def test_the_agents_client_says_why_when_it_writes_after_the_broker_refused_it(
        odd_certs, monkeypatch):
    """On a loaded host the agent's loop may write its CONNECT only after the broker's alert
    and reset arrived: the write fails with an EOF, and the operator was told "if port … is
    plain MQTT use mqtt://" for an expired client certificate."""
    send = paho.Client._sock_send

    def late_send(client: paho.Client, buf: bytes | bytearray) -> int:
        # The loop's poll said "writable" before the broker's verdict; the write runs after it
        # and the reset came, as when a loaded host's scheduler runs the loop late.
        sock = client.socket()
        assert sock is not None
        select.select([sock], [], [], 5)  # the broker's verdict has come,
        time.sleep(0.2)  # and its reset
        return send(client, buf)

    monkeypatch.setattr(paho.Client, "_sock_send", late_send)
    pki = odd_certs["pki"]
    assert isinstance(pki, Path)
    relay = _SlowBroker(int(odd_certs["mtls"]))
    url = with_tls(parse_broker_url(f"mqtts://127.0.0.1:{relay.port}"), str(pki / "ca.crt"),
                   str(pki / "client-expired.crt"), str(pki / "client-expired.key"))
    with pytest.raises(aiomqtt.MqttError) as err:
        async with make_client(url, "gpu0001-late", timeout=10):
            pass
    text = describe_mqtt_error(url, err.value)
    assert "the broker refused the client certificate (--cert " in text, text
    assert "it has expired, renew it" in text, text


async def test_the_agents_client_on_a_tls_port_with_mqtt_fails_at_once_and_says_mqtts(secured):
    _broker, creds, tls_port, _work = secured
    url = parse_broker_url(f"mqtt://gpu0001:{creds['gpu0001']}@127.0.0.1:{tls_port}")
    started = time.monotonic()
    with pytest.raises(aiomqtt.MqttError) as err:
        async with make_client(url, "gpu0001-plain", timeout=10):
            pass
    assert time.monotonic() - started < 5, "waited out the connect timeout"
    text = describe_mqtt_error(url, err.value)
    assert "use mqtts:// with --ca" in text and creds["gpu0001"] not in text, text
