"""A newcomer run's findings in the console: ':seek' (named by README and the help) answered
'unknown command' in a live console, and the help's command line wrapped under its label and
left out node detail's r/u."""

from tests.tui.conftest import SIZE
from tests.tui.test_newcomer_run import notices
from tests.tui.test_views import text_of


async def test_seek_in_a_live_console_says_it_is_for_a_recording(world):
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        await pilot.press("colon", *"seek 90", "enter")
        await pilot.pause()
        said = notices(world.app)[-1]
        assert "unknown command" not in said, said
        assert said.startswith("':seek' is for a recording: fleetdeck replay FILE"), said


async def test_help_lists_every_command_line_command_and_node_detail_keys(world):
    async with world.app.run_test(size=(160, 60)) as pilot:
        world.tick()
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        lines = text_of(world.app).splitlines()
        drain = next(line for line in lines if ":drain HOSTLIST" in line)
        # On a line of its own under the label column, not wrapped to the dialog's edge.
        assert "        :drain HOSTLIST · :resume HOSTLIST · :restart JOB" in drain, drain
        assert any(":node NAME :ctx NAME" in line for line in lines)
        node = next(line for line in lines if " Node " in line)
        assert "r drain · u resume this node" in node, node


async def test_a_console_that_cannot_reach_its_broker_says_so_of_nodes_it_knows(tmp_path):
    """Nodes known from the store, broker unreachable: the overview said "none so far: no
    telemetry yet from 16 nodes" and the header cut the reason to "…: connecti)"."""
    import time

    from fleetdeck.brokerurl import parse_broker_url
    from fleetdeck.console.audit import MemoryAudit
    from fleetdeck.console.tui.app import FleetdeckApp
    from tests.tui.fleet import CLUSTER, Clock, SynthFleet

    app = FleetdeckApp(cluster=CLUSTER, url=parse_broker_url("mqtt://127.0.0.1:1"),
                       auto_tick=False, audit=MemoryAudit())
    async with app.run_test(size=(160, 48)) as pilot:
        SynthFleet(4, Clock(time.time())).birth(app.session.ingest)
        for _ in range(20):  # until the first connect has failed
            app.tick()
            await pilot.pause(0.1)
            if app.session.feed is not None and app.session.feed.conn.state == "disconnected":
                break
        app.tick()
        await pilot.pause()
        text = text_of(app)
        # Why in full (the header cuts it): "(disconnected)" said nothing to fix.
        assert ("Top problems unknown: cannot reach the MQTT broker: connection refused (is it "
                "running?); no telemetry yet from 4 nodes") in text, text
        header = text.splitlines()[0]
        assert ("disconnected (cannot reach the MQTT broker: connection refused (is it "
                "running?))") in header, header


def test_the_header_keeps_the_failure_of_a_default_broker_in_view():
    """The default broker's sentence says it is the default; in the header, cut at 72
    characters, that note hid "connection refused"."""
    import dataclasses

    from fleetdeck.brokerurl import describe_mqtt_error, parse_broker_url
    from fleetdeck.console.audit import MemoryAudit
    from fleetdeck.console.tui.app import FleetdeckApp
    from tests.tui.fleet import CLUSTER

    url = dataclasses.replace(parse_broker_url("mqtt://127.0.0.1:1883"), default=True)
    app = FleetdeckApp(cluster=CLUSTER, url=url, auto_tick=False, audit=MemoryAudit())
    sentence = describe_mqtt_error(url, ConnectionRefusedError(111, "Connect call failed"))
    assert "(the default: " in sentence
    assert app._short_detail(sentence) == ("cannot reach the MQTT broker: connection refused "
                                           "(is it running?)")
