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
])
def test_errno_words_become_a_sentence(err, words):
    url = parse_broker_url("mqtt://nosuchhost.invalid:1883")
    text = describe_mqtt_error(url, err)
    assert words in text and "Errno" not in text and text.endswith(".")
