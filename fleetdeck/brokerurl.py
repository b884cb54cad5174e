"""``mqtt://[user:pass@]host:port`` and ``mqtts://`` URLs, and aiomqtt clients made from them."""

import dataclasses
import errno
import logging
import os
import re
import ssl
import time
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import unquote, urlsplit

import aiomqtt
import paho.mqtt.client as paho
from aiomqtt.types import PahoSocket
from paho.mqtt.enums import LogLevel

from fleetdeck.errors import UserError
from fleetdeck.hostport import host_port
from fleetdeck.paths import not_a_file, unreadable

ENV_VAR = "FLEETDECK_BROKER"
DEFAULT_URL = "mqtt://127.0.0.1:1883"


@dataclass(frozen=True, slots=True)
class BrokerURL:
    host: str
    port: int
    tls: bool = False
    username: str | None = None
    password: str | None = None
    ca_file: str | None = None
    """CA bundle that signed the broker's certificate (mqtts://); default: the system's."""
    cert_file: str | None = None
    key_file: str | None = None
    """Client certificate and key for mutual TLS."""
    default: bool = dataclasses.field(default=False, compare=False)
    """No --broker and no $FLEETDECK_BROKER: an error says so, as a newcomer reading
    "connection refused" at 127.0.0.1:1883 never chose that address."""

    def __str__(self) -> str:
        """The URL without its password (safe for headers and logs)."""
        scheme = "mqtts" if self.tls else "mqtt"
        user = f"{self.username}@" if self.username else ""
        return f"{scheme}://{user}{self.address}"

    @property
    def address(self) -> str:
        """``host:port``, an IPv6 host in brackets (the console's header shows this)."""
        return host_port(self.host, self.port)


def _without_password(url: str) -> str:
    """``url`` with the password of ``user:password@`` left out, also where the scheme is
    missing ('bob:hunter2@h:1' was shown whole in the sentence that asked for mqtt://). The
    password runs to the last '@': one holding an unencoded '@' or '/' ('p@ss', 'hu/nt') is
    hidden whole, not cut at its first (its tail was shown), at the cost of a path's '@'."""
    return re.sub(r"(^|/)([^/@:]*):(?!//).*@", r"\1\2@", url)


def _meant(url: str, shown: str) -> str:
    """": did you mean mqtt://HOST:PORT?" for a URL without its scheme ('127.0.0.1:41234', as
    the demo's header shows its broker), with tcp://, or with a typo in the scheme's '://'
    (mqtt//h, mqtt:/h): what to type, as a newcomer's 3 a.m. run read only "must start with
    mqtt://". '' where no host[:port] is left, or where a password was given (the suggestion
    would lose it, as it is never shown)."""
    typo = re.fullmatch(r"(mqtts?|tcp)[:/]+(.+)", shown)
    scheme = "mqtts" if typo and typo[1] == "mqtts" else "mqtt"
    bare = typo[2] if typo else shown
    if typo and re.fullmatch(r"(mqtts?|tcp):/*:\d{1,5}", shown):
        # 'mqtt://:1883': the host left out, not the scheme's ':' doubled. The '[:/]+' above
        # took the port's ':' too, and offered mqtt://1883, a host named 1883 (an audit).
        bare = "127.0.0.1" + shown[shown.rindex(":"):]
    if "@" in url or not re.fullmatch(r"([A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\])(:\d{1,5})?", bare):
        return ""
    return f": did you mean {scheme}://{bare}?"


def parse_broker_url(url: str) -> BrokerURL:
    """Parse a broker URL or raise :class:`UserError` with one plain sentence."""
    try:
        parts = urlsplit(url)
    except ValueError as err:
        shown = _without_password(url)
        if "IPv6" in str(err):
            # urllib's "Invalid IPv6 URL" alone named neither the URL nor the fix (a CLI fuzz
            # round): a '[' unclosed, or a ']' unopened.
            raise UserError(f"broker URL '{shown}' is not valid: an IPv6 address goes in "
                            "brackets, the port after them, as mqtt://[::1]:1883.") from None
        raise UserError(f"broker URL '{shown}' is not valid: {err}.") from None
    try:
        port = parts.port
    except ValueError:
        # urllib's words ("Port could not be cast to integer value as …") are for programmers;
        # the URL is not repeated, as it may hold a password.
        given = parts.netloc.rpartition("@")[2].rpartition(":")[2]
        if "@" in url.partition("//")[2] and "@" not in parts.netloc:
            # A '/' in the password cut the URL there ('bob:hu/nt@h'): the 'port' is the
            # password's head, never to be shown.
            raise UserError("the broker URL's user:password@ holds a '/': write it as %2F "
                            "(e.g. mqtt://user:pa%2Fss@host:1883).") from None
        raise UserError(f"the broker URL's port '{given}' is not a number from 1 to 65535 "
                        "(e.g. mqtt://127.0.0.1:1883).") from None
    if port == 0:
        raise UserError("the broker URL's port '0' is not a number from 1 to 65535 "
                        "(e.g. mqtt://127.0.0.1:1883).")
    shown = _without_password(url)  # error messages end up in logs and terminals
    if parts.scheme not in ("mqtt", "mqtts"):
        raise UserError(f"broker URL '{shown}' must start with mqtt:// or mqtts://"
                        f"{_meant(url, shown) or ' (e.g. mqtt://127.0.0.1:1883).'}")
    if not parts.hostname:
        raise UserError(f"broker URL '{shown}' has no host name{_meant(url, shown) or '.'}")
    if not parts.hostname.isprintable() or any(c.isspace() for c in parts.hostname):
        # An ESC or a stray space typed into the host read "the host name '127.0.0.1' does
        # not resolve" with the byte itself sent to the terminal (an audit): named, escaped.
        raise UserError(f"the broker URL's host name {parts.hostname!r} holds a space or a "
                        "control character: retype it (e.g. mqtt://127.0.0.1:1883).")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise UserError(f"broker URL '{shown}' may only hold a host and port, not a path or "
                        "query.")
    tls = parts.scheme == "mqtts"
    return BrokerURL(
        host=parts.hostname,
        port=port if port is not None else (8883 if tls else 1883),
        tls=tls,
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
    )


def broker_from_env(explicit: str | None, ca: str | None = None, cert: str | None = None,
                    key: str | None = None) -> BrokerURL:
    """The broker URL from the flag or $FLEETDECK_BROKER, with TLS files from flags or
    $FLEETDECK_CA / $FLEETDECK_CERT / $FLEETDECK_KEY."""
    env = os.environ.get
    if explicit:
        url = parse_broker_url(explicit)
    elif env(ENV_VAR) is not None:
        # Named: "$FLEETDECK_BROKER=…" is what to fix, not a flag never typed; an empty one
        # (a shell's `export FLEETDECK_BROKER=` with the value lost) is refused, not read as
        # the default broker (an SRE drill).
        text = env(ENV_VAR, "").strip()
        if not text:
            raise UserError(f"${ENV_VAR} is set but empty: give a broker URL "
                            f"(e.g. {DEFAULT_URL}) or unset it.")
        try:
            url = parse_broker_url(text)
        except UserError as err:
            raise UserError(f"${ENV_VAR}: {err}") from None
    else:
        url = dataclasses.replace(parse_broker_url(DEFAULT_URL), default=True)
    # A TLS file's error names where it came from: its flag, or its variable.
    names = {flag: f"${var}" for flag, given, var in (
        ("--ca", ca, "FLEETDECK_CA"), ("--cert", cert, "FLEETDECK_CERT"),
        ("--key", key, "FLEETDECK_KEY")) if not given}
    return with_tls(url, ca or env("FLEETDECK_CA"), cert or env("FLEETDECK_CERT"),
                    key or env("FLEETDECK_KEY"), names=names)


def with_tls(url: BrokerURL, ca: str | None, cert: str | None, key: str | None,
             names: dict[str, str] | None = None) -> BrokerURL:
    """``names``: how to call each file in an error (its flag, or the variable it came from)."""
    if not (ca or cert or key):
        return url
    given = {"--ca": ca, "--cert": cert, "--key": key}
    named = {flag: (names or {}).get(flag, flag) for flag in given}
    if not url.tls:
        which = "/".join(named[f] for f, path in given.items() if path)
        raise UserError(f"TLS files ({which}) need an mqtts:// broker URL, not {url}.")
    for flag, path in given.items():
        if not path:
            continue
        why = not_a_file(path)
        if why == "does not exist":
            raise UserError(f"{named[flag]} {path}: no such file.")
        if why:  # a FIFO read "no such file" too (a CLI fuzz round)
            raise UserError(f"{named[flag]} {path} {why}.")
        # Read here, not first at the connect: an unreadable CA said "cannot load TLS files
        # for mqtts://…: [Errno 13] Permission denied" naming no file, and the console opened
        # its screen on it.
        if why := unreadable(path):
            raise UserError(f"{named[flag]} {path}: cannot be read ({why}).")
    if bool(cert) != bool(key):
        raise UserError(f"{named['--cert']} and {named['--key']} go together (client "
                        "certificate and its key).")
    if problem := _tls_files_problem(ca, cert, key, named):
        raise UserError(f"{problem}.")
    return dataclasses.replace(url, ca_file=ca, cert_file=cert, key_file=key)


class _Encrypted(Exception):
    """A key that asks for its pass phrase: OpenSSL's own prompt takes it at the connect."""


def _ask_no_passphrase() -> str:
    raise _Encrypted


def _tls_files_problem(ca: str | None, cert: str | None, key: str | None,
                       named: dict[str, str]) -> str:
    """What is wrong with the TLS files' contents, in words, or "". OpenSSL's own sentence
    ("cannot load TLS files for mqtts://…: [X509: NO_CERTIFICATE_OR_CRL_FOUND] no certificate
    or crl found (_ssl.c:4154)", a newcomer's --ca given the wrong file) named no file."""
    try:
        ctx = ssl.create_default_context(cafile=ca)
    except ssl.SSLError:
        return (f"{named['--ca']} {ca} holds no PEM certificate: give the certificate of the CA "
                "that signed the broker's (ca.crt from deploy/mosquitto/mkcerts.sh)")
    if not (cert and key):
        return ""
    try:
        ctx.load_cert_chain(cert, key, password=_ask_no_passphrase)
    except _Encrypted:
        return ""
    except ssl.SSLError as err:
        if not _holds(cert, b"-----BEGIN CERTIFICATE-----"):
            return f"{named['--cert']} {cert} holds no PEM certificate"
        # A key of another type than the certificate's (an EC key beside an RSA certificate)
        # is OpenSSL's NO_CERTIFICATE_ASSIGNED, not KEY_VALUES_MISMATCH: it read "holds no
        # PEM private key" of a PEM private key (a review).
        if err.reason == "KEY_VALUES_MISMATCH" or _holds(key, b" PRIVATE KEY-----"):
            return (f"{named['--key']} {key} is not the key of {named['--cert']} {cert} (give "
                    "the key made with that certificate)")
        return f"{named['--key']} {key} holds no PEM private key"
    return ""


def _holds(path: str, marker: bytes) -> bool:
    try:
        with open(path, "rb") as f:
            return marker in f.read()
    except OSError:
        return False


def tls_context(url: BrokerURL) -> ssl.SSLContext:
    try:
        ctx = ssl.create_default_context(cafile=url.ca_file)
        if url.cert_file and url.key_file:
            ctx.load_cert_chain(url.cert_file, url.key_file)
    except (ssl.SSLError, OSError) as err:
        raise UserError(f"cannot load TLS files for {url}: {err}.") from None
    return ctx


OVERSIZE_AFTER_S = 0.25
"""A drop this soon after the connection's largest publish so far may have come because of it:
Mosquitto drops a sender of a packet over its ``max_packet_size`` as it reads it
(fleetdeck/takeover.py)."""


class _Client(aiomqtt.Client):
    """aiomqtt's client with its write registration made safe against a socket that closed.

    paho asks for write readiness each time it queues a packet; aiomqtt registers the writer a
    loop iteration later (``call_soon_threadsafe``), on the file descriptor it read at the
    request. When paho closes the socket in between (a process that was stopped past its
    keepalive finds, on SIGCONT, the broker gone: its keepalive check or the read of the EOF
    closes the socket right after a PINGREQ or telemetry publish asked for the writer),
    ``add_writer`` ran on the closed descriptor and asyncio logged an "Exception in callback"
    traceback ending in "OSError: [Errno 9] Bad file descriptor" before the reconnect; had the
    number been reused by a new socket by then, the stale writer would have been put on it.
    Here the deferred registration first checks that the socket is still paho's.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._socket_error: str | None = None
        """paho's last "failed to receive on socket: …" (an SSL alert, a reset), for the
        connect's error."""
        # paho's lines reach the "mqtt" logger through ``_on_paho_log`` alone, which knows
        # whether this client has its CONNACK: a filter on that logger is every client's.
        self._client.disable_logger()
        self._client.on_log = self._on_paho_log
        self.largest_sent = 0
        """Bytes of this connection's largest publish so far."""
        self.lost_at: float | None = None
        """When paho saw the connection go (monotonic)."""
        self.last_sent: tuple[float, int, bool] | None = None
        """(monotonic time, bytes, the largest so far) of its latest publish: a broker drops a
        sender of a packet over its ``max_packet_size`` the moment it reads it, and the agent
        tells that from a takeover by it (fleetdeck/takeover.py)."""
        self.taken = 0
        """Bytes of the largest publish this connection outlived by ``OVERSIZE_AFTER_S``: one
        the broker read and kept it for, so no larger than its ``max_packet_size``."""

    async def publish(self, /, topic: str, payload: Any = None, *args: Any,
                      **kwargs: Any) -> None:
        size = len(payload) if isinstance(payload, bytes | bytearray | str) else 0
        now = time.monotonic()
        last = self.last_sent
        if last is not None and last[1] > self.taken and now - last[0] > OVERSIZE_AFTER_S:
            self.taken = last[1]
        self.largest_sent = max(self.largest_sent, size)
        self.last_sent = (now, size, size >= self.largest_sent)
        await super().publish(topic, payload, *args, **kwargs)

    def _on_paho_log(self, client: paho.Client, userdata: Any, level: int, buf: str) -> None:
        if level == paho.MQTT_LOG_ERR and "on socket:" in buf and not self._connected.done():
            # Before the CONNACK the reason goes into the connect's error (``_on_disconnect``),
            # which the caller says in one sentence: logged here too, the journal said it
            # twice, once without what to fix. After it, a reset or an SSL alert mid-session
            # is the one line that says why the connection was lost: it is logged.
            reason = buf.partition("on socket:")[2].strip()
            self._socket_error = reason if "alert" in reason else (
                _unread_alert(client.socket()) or reason)
            return
        # paho passes its LogLevel (an IntEnum) where its callback type says int.
        self._logger.log(paho.LOGGING_LEVEL.get(cast(LogLevel, level), logging.DEBUG), "%s", buf)

    def _on_disconnect(self, client: paho.Client, userdata: Any, flags: Any, reason_code: Any,
                       properties: Any = None) -> None:
        # aiomqtt ignores a connection lost before the CONNACK and waits out its whole
        # timeout, then says "Operation timed out": a broker refusing our client certificate
        # (an SSL alert) or a plain-MQTT CONNECT on its TLS port read as "did not answer in
        # time" in the agent's journal, 10 s per attempt. The attempt fails now, with paho's
        # reason.
        self.lost_at = time.monotonic()
        if not self._connected.done():
            self._connected.set_exception(aiomqtt.MqttError(
                self._socket_error or "the broker closed the connection before accepting it"))
            return
        super()._on_disconnect(client, userdata, flags, reason_code, properties)

    def _on_socket_register_write(self, client: paho.Client, userdata: Any,
                                  sock: PahoSocket) -> None:
        def write() -> None:
            # As aiomqtt's own callback: a failed write (BrokenPipe …) ends the connection.
            try:
                client.loop_write()
            except Exception as exc:
                if not self._disconnected.done():
                    self._disconnected.set_exception(exc)

        def register() -> None:
            # paho resets its registration when it closes the socket, so dropping this one
            # loses nothing; the next connection registers its own socket.
            current = client.socket()
            if current is not None and current is sock:
                self._loop.add_writer(current.fileno(), write)

        # paho may ask from the executor thread that runs its connect().
        self._loop.call_soon_threadsafe(register)


def _unread_alert(sock: Any) -> str | None:
    """The TLS alert a broker sent before it hung up, when it still waits unread.

    paho says "failed to receive on socket" for a failed write too. A broker that refuses our
    client certificate sends its alert and resets the connection; an agent whose loop, on a
    loaded host, writes its CONNECT after both came but before it read them fails that write
    with "EOF occurred in violation of protocol", and the operator read "if port … is plain
    MQTT use mqtt://" in place of "it has expired". TCP hands over the alert ahead of the
    reset, so it can still be read here, while paho's socket is open."""
    if not isinstance(sock, ssl.SSLSocket):
        return None
    try:
        sock.recv(1)
    except ssl.SSLError as err:
        # Nothing more to read, or a clean end: none of these says why.
        return str(err) if "alert" in str(err).lower() else None
    except OSError:
        return None
    return None


def make_client(
    url: BrokerURL,
    identifier: str,
    *,
    will: aiomqtt.Will | None = None,
    keepalive: int = 10,
    clean_session: bool = True,
    timeout: float = 10.0,
    max_queued_incoming: int = 0,
) -> aiomqtt.Client:
    """An MQTT 3.1.1 client (amqtt speaks nothing else; everything we need is in payloads)."""
    kwargs: dict[str, Any] = {}
    if url.tls:
        kwargs["tls_context"] = tls_context(url)
    return _Client(
        url.host,
        url.port,
        identifier=identifier,
        username=url.username,
        password=url.password,
        will=will,
        keepalive=keepalive,
        clean_session=clean_session,
        protocol=aiomqtt.ProtocolVersion.V311,
        timeout=timeout,
        max_queued_incoming_messages=max_queued_incoming,
        **kwargs,
    )


_ERRNO = re.compile(r"\[Errno (-?\d+)\]")


DEFAULT_NOTE = f"(the default: no --broker, and ${ENV_VAR} is not set)"


def _refused(url: BrokerURL, where: str) -> str:
    """A refused connection: "is it running?", or, with a demo running here, the demo's URL to
    give (a newcomer's second terminal without the demo's URL, or a port one digit off)."""
    from fleetdeck.paths import running_demo_brokers

    # Only for a broker the demo's could be mistyped for: plain anonymous MQTT on this host.
    # A production broker refusing (TLS, a user, another host) must not send the on-call's
    # `status` to a drill's broker (running_demo's rule, fleetdeck/paths.py).
    loopback = url.host.lower() == "localhost" or url.host == "::1" or url.host.startswith(
        "127.")
    demo_like = loopback and not (url.tls or url.username or url.ca_file or url.cert_file)
    demos = [d for d in running_demo_brokers() if d != f"mqtt://{url.host}:{url.port}"
             ] if demo_like else []
    if not demos:
        return f"cannot reach the MQTT broker at {where}: connection refused (is it running?)."
    return (f"cannot reach the MQTT broker at {where}: connection refused; a demo's broker "
            f"runs here at {demos[0]}: give --broker {demos[0]} (or export "
            f"FLEETDECK_BROKER={demos[0]}).")


def describe_mqtt_error(url: BrokerURL, err: Exception) -> str:
    """One sentence for an unreachable or refusing broker."""
    text = str(err) or type(err).__name__
    # Said right after the URL, so that the sentence's last hint ("is it running?") stays last.
    where = f"{url} {DEFAULT_NOTE}" if url.default else str(url)
    low = text.lower()
    if "certificate" in low or "ssl" in low or "tls" in low:
        return f"TLS with the MQTT broker at {where} failed ({text}); {_tls_fix(url, low)}."
    if ("name or service not known" in low or "nodename nor servname" in low
            or "temporary failure in name resolution" in low or "no address associated" in low):
        return (f"cannot reach the MQTT broker at {where}: the host name '{url.host}' does not "
                "resolve (a typo, or no DNS here?).")
    errno_of = _ERRNO.search(text)
    if errno_of is not None and "refused" not in low:
        # asyncio's "[Errno N] Connect call failed (…)" names the errno only: 111 is refused,
        # others (no route, unreachable, timed out) are said in the OS's own words.
        code = int(errno_of.group(1))
        if code == errno.ECONNREFUSED:
            return _refused(url, where)
        if code == errno.ECONNRESET:
            return (f"cannot reach the MQTT broker at {where}: connection reset by peer "
                    f"({_scheme_hint(url)}).")
        if code > 0:
            return f"cannot reach the MQTT broker at {where}: {os.strerror(code).lower()}."
    if "refused" in low and "not authori" not in low and "bad user" not in low:
        return _refused(url, where)
    if "not authori" in low or "bad user" in low:
        return _refused_credentials(url, where, low)
    if "did not confirm the subscription" in low:
        # The CONNACK came: "did not answer in time" sent operators to a broker that was up.
        return (f"connected to the MQTT broker at {where}, but {text} (a hung or overloaded "
                "broker? try again).")
    if "timed out" in low:
        return f"the MQTT broker at {where} did not answer in time."
    if low.startswith("code ") and low.endswith("(unknown error)"):
        # gmqtt read another protocol's reply (an HTTP server's "HTTP/1.0 400") as a CONNACK
        # with a return code MQTT does not have: "code 104 (Unknown error)" (a newcomer).
        return (f"the server at {where} did not answer as an MQTT broker (another service on "
                "that port?).")
    if "closed the connection before accepting" in low or "connection reset" in low or (
            "eof occurred" in low):
        # A TLS ClientHello sent to a plain listener, or MQTT's CONNECT to a TLS one, is
        # dropped without a word by Mosquitto: "connection reset" or an EOF is all a client
        # gets, and "is it running?" sent the SRE of a drill to a broker that was running.
        return f"{_closed_sentence(where, text, low)} ({_scheme_hint(url)})."
    if "disconnected" in low or "was lost" in low or "not currently connected" in low:
        # aiomqtt's "Disconnected during message iteration" and the like: its words describe
        # its internals; an agent stopped past its keepalive (the broker dropped it) reads this.
        return f"lost the connection to the MQTT broker at {where}."
    return f"cannot talk to the MQTT broker at {where}: {text}."


def _refused_credentials(url: BrokerURL, where: str, low: str) -> str:
    """A CONNACK refusing the user (codes 4 and 5): gmqtt says "code 5 (Connection Refused: not
    authorised)", paho "Not authorized"; the header cut the former at "(code 5 (Connection
    Refused:…" (a drill). The broker's reason in two words, then what to fix."""
    reason = "bad user name or password" if "bad user" in low else "not authorised"
    if url.username is None:
        return (f"the MQTT broker at {where} refused an anonymous connection ({reason}): give "
                f"a user and password in the broker URL (mqtt://USER:PASSWORD@{url.address}).")
    return (f"the MQTT broker at {where} refused the credentials ({reason}): check the user "
            "and password in the broker URL (--broker).")


def _closed_sentence(where: str, text: str, low: str) -> str:
    if "connection reset" in low:
        return f"cannot reach the MQTT broker at {where}: connection reset by peer"
    if "closed the connection before accepting" in low:
        return f"cannot talk to the MQTT broker at {where}: {text.rstrip('.')}"
    return f"cannot talk to the MQTT broker at {where}: the connection was closed ({text})"


def _scheme_hint(url: BrokerURL) -> str:
    """What a broker that drops the connection before its CONNACK most often means: a clause,
    which the caller ends, inside parentheses or after a semicolon. A question here ended
    "not expired?." after a TLS EOF."""
    if url.tls and url.cert_file:
        return (f"if port {url.port} is plain MQTT use mqtt://, or the broker's TLS port; else "
                f"the broker refused --cert {url.cert_file}: check that it is signed by the CA "
                "the broker trusts and has not expired")
    if url.tls:
        return (f"if port {url.port} is plain MQTT use mqtt://, or the broker's TLS port; if "
                "the broker requires client certificates, give --cert and --key")
    return f"if port {url.port} is the broker's TLS listener, use mqtts:// with --ca"


def _tls_fix(url: BrokerURL, low: str) -> str:
    """What to fix for a TLS failure, from OpenSSL's reason (lower case): the CA, the host
    name, the broker's certificate's dates, or the client certificate each have their own
    fix, and "check --ca" for an expired certificate sent operators to the wrong file."""
    cert = f"--cert {url.cert_file}" if url.cert_file else "--cert"
    # Alerts are the broker's verdict on our client certificate (mutual TLS).
    if "alert certificate required" in low or (
            "alert handshake failure" in low and not url.cert_file):
        return "the broker requires a client certificate: give --cert and --key"
    if "alert certificate expired" in low:
        return f"the broker refused the client certificate ({cert}): it has expired, renew it"
    if "alert unknown ca" in low or "alert bad certificate" in low or (
            "alert certificate unknown" in low or "alert decrypt error" in low):
        return (f"the broker does not trust the client certificate ({cert}): it must be signed "
                "by the CA the broker trusts (its cafile)")
    if "certificate has expired" in low:
        return ("the broker's certificate has expired: renew it on the broker "
                "(deploy/mosquitto/mkcerts.sh), or check this machine's clock")
    if "not yet valid" in low:
        return ("the broker's certificate is not valid yet: check this machine's clock "
                "(timedatectl), or the certificate's start date")
    if "hostname mismatch" in low or "ip address mismatch" in low:
        return (f"the broker's certificate is not for '{url.host}': connect by the name or "
                "address its subjectAltName holds, or reissue it for this one")
    if ("wrong version number" in low or "record layer failure" in low
            or "packet length too long" in low or "unexpected eof" in low):
        return (f"port {url.port} does not speak TLS: use mqtt:// for a plain MQTT port, or the "
                "broker's TLS port")
    if "eof occurred" in low:
        # The broker hung up mid-handshake: a plain listener, or a client certificate refused.
        return _scheme_hint(url)
    if url.ca_file is None:
        return ("no --ca was given, and the system's CAs did not sign the broker's certificate: "
                "give --ca with the CA that did (ca.crt from deploy/mosquitto/mkcerts.sh)")
    return (f"check that --ca {url.ca_file} is the CA that signed the broker's certificate "
            "and that the host name matches it")
