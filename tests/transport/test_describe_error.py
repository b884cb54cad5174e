"""The sentence an unreachable broker gets: the OS's errno wording never reaches the operator."""

import socket

import pytest

from fleetdeck.brokerurl import describe_mqtt_error, parse_broker_url


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
