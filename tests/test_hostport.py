"""Every address fleetdeck prints is one a browser, Prometheus or an operator can use: an IPv6
host in brackets (``fleetdeck serve --bind ::1`` printed ``http://::1:8000``)."""

import pytest

from fleetdeck.brokerurl import BrokerURL, parse_broker_url
from fleetdeck.hostport import host_port


@pytest.mark.parametrize("host, want", [("127.0.0.1", "127.0.0.1:9100"),
                                        ("gpu-mgmt.example", "gpu-mgmt.example:9100"),
                                        ("::1", "[::1]:9100"), ("::", "[::]:9100"),
                                        ("[::1]", "[::1]:9100")])
def test_host_port_brackets_ipv6_hosts_only(host, want):
    assert host_port(host, 9100) == want


def test_a_broker_url_and_its_address_bracket_an_ipv6_host():
    url = parse_broker_url("mqtt://[::1]:1883")
    assert url.host == "::1"
    assert (str(url), url.address) == ("mqtt://[::1]:1883", "[::1]:1883")
    assert BrokerURL("10.0.0.7", 8883, tls=True).address == "10.0.0.7:8883"


def test_the_console_header_shows_an_ipv6_broker_in_brackets():
    from textual.content import Content

    from fleetdeck.console.audit import MemoryAudit
    from fleetdeck.console.tui.app import FleetdeckApp

    app = FleetdeckApp(cluster="c", url=BrokerURL("::1", 1883), auto_tick=False,
                       audit=MemoryAudit())
    assert Content.from_markup(app.link_text(0.0)).plain.startswith("[::1]:1883 ")


@pytest.mark.parametrize(("url", "shown"), [
    (BrokerURL("broker.example", 8883, tls=True, username="alice", password="hunter2"),
     "mqtts://alice@broker.example:8883 "),
    (BrokerURL("10.0.0.7", 8883, tls=True), "mqtts://10.0.0.7:8883 "),
    (BrokerURL("10.0.0.7", 1883, username="bob", password="pw"), "mqtt://bob@10.0.0.7:1883 "),
    (BrokerURL("127.0.0.1", 1883), "127.0.0.1:1883 "),
])
def test_the_console_header_shows_tls_and_the_login_never_the_password(url, shown):
    """A newcomer on a production broker could not tell from the header whether the console
    spoke TLS, nor as whom: it showed host:port alone."""
    from textual.content import Content

    from fleetdeck.console.audit import MemoryAudit
    from fleetdeck.console.tui.app import FleetdeckApp

    app = FleetdeckApp(cluster="c", url=url, auto_tick=False, audit=MemoryAudit())
    text = Content.from_markup(app.link_text(0.0)).plain
    assert text.startswith(shown) and "hunter2" not in text and ":pw" not in text


@pytest.mark.parametrize(("width", "shown"), [
    (200, "mqtts://gpu-console@mqtt.example.internal:8883 connecting  cmds 1 open"),
    (96, "mqtts://mqtt.example.internal:8883 connecting  cmds 1 open"),
    (80, "mqtt.example.internal:8883 connecting  cmds 1 open"),
])
def test_the_header_says_the_broker_shorter_where_the_url_would_cut_off_its_state(
        monkeypatch, width, shown):
    """At 80 columns mqtts://user@host:8883 pushed the connection's state to the header's
    edge and every alarm after it ("● RECORDING", "cmds 1 open") off the screen (a review)."""
    from textual.content import Content
    from textual.geometry import Size

    from fleetdeck.console.audit import MemoryAudit
    from fleetdeck.console.tui.app import FleetdeckApp

    monkeypatch.setattr(FleetdeckApp, "size", property(lambda _self: Size(width, 24)))
    url = BrokerURL("mqtt.example.internal", 8883, tls=True, username="gpu-console",
                    password="hunter2")
    app = FleetdeckApp(cluster="ndv5-east", url=url, auto_tick=False, audit=MemoryAudit(),
                       operator="alice")
    monkeypatch.setattr(type(app.tracker), "active", property(lambda _self: [object()]))
    text = Content.from_markup(app.header_text(0.0)).plain
    assert text.startswith(f"fleetdeck ndv5-east [RW?] {shown}"), text
    assert "hunter2" not in text
