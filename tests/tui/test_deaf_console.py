"""A console whose broker answers its pings and delivers the fleet to others, not to it: a
2026-12-07 drill's console said "the broker answers: the fleet is silent" for 490 s while
``fleetdeck status`` on the same broker read the fleet (console/deaf_check.py)."""

import time

from tests.conftest import eventually
from tests.tui.test_hung_broker import console_of_two_agents


def deafen(app) -> None:
    """What the drill's broker did, as far as the console could see: the link stays up and
    its pings are answered, and nothing of its subscriptions comes any more. Here its
    subscriptions are taken back behind the transport's back (an UNSUBSCRIBE it does not
    know of), so the broker has nothing to deliver to it."""
    link = app.session.feed.link
    link.client.unsubscribe(list(link.filters))


async def test_a_deaf_console_beside_a_fleet_that_publishes_is_not_told_the_fleet_is_silent(
        mosquitto):
    async with console_of_two_agents(mosquitto) as (app, _hang):
        feed = app.session.feed
        connects = feed.conn.connects
        deafen(app)
        deafened = time.time()
        said: list[str] = []

        def heard_again() -> bool:
            app.tick()
            text = app.header_text(time.time())
            if "nothing heard" in text:
                said.append(text)
            return (feed.conn.connects > connects and app.state.last_update is not None
                    and app.state.last_update > deafened + 1)

        # A fresh subscription hears the fleet: the console's connection is made again,
        # subscribing again, and the fleet is heard once more.
        await eventually(heard_again, timeout=45, message="the fleet heard again")
        assert said, "the quiet was never said"
        assert not any("the fleet is silent" in s for s in said), said
        lines = [line.text for _n, line in app.session.log]
        assert any("made again" in text for text in lines), lines[-5:]

