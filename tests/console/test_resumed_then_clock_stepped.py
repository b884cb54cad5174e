"""A console that did not run counts its broker's silence from when it ran again
(console/sight_watch.py): that moment is of the wall clock, and a step of that clock after it
(NTP catching up on a VM that was suspended) must move it too. Left as it was, a step back of
10 min read every later silence as "0 s" for 10 min: a broker that then hung was not said
hung, nor pinged, until its link dropped."""

from types import SimpleNamespace

from fleetdeck.console.session import ConsoleSession

CLUSTER = "resumed"


def test_a_broker_hung_after_a_resume_and_a_clock_step_back_is_said_hung():
    now, steady, heard = [1000.0], [50.0], [0.0]
    pinged: list[float] = []
    session = ConsoleSession(CLUSTER, clock=lambda: now[0], steady=lambda: steady[0],
                             operator="t")
    conn = SimpleNamespace(state="connected", connects=1, why="")
    session.feed = SimpleNamespace(  # type: ignore[assignment]
        conn=conn, keepalive=10, broker_heard_s=lambda: heard[0],
        ping=lambda: pinged.append(now[0]))

    def tick(s: float = 0.5, *, silent: bool = False) -> None:
        now[0] += s
        steady[0] += s
        heard[0] = heard[0] + s if silent else 0.0
        session._watch_sight(now[0])

    for _ in range(4):
        tick()
    tick(30.0, silent=True)  # SIGSTOPped (a suspended VM) for 30 s
    for _ in range(4):
        tick()
    now[0] -= 600.0  # NTP steps the clock back on resuming
    tick()
    pinged.clear()
    for _ in range(40):  # then the broker hangs: 20 s of nothing
        tick(silent=True)
    lines = [line.text for _seq, line in session.log]
    assert any("did not run for 30 s" in t for t in lines), lines
    assert any("stepped back by 600 s" in t for t in lines), lines
    assert any("the broker has not answered for 16 s (hung?)" in t for t in lines), lines
    assert pinged, "the quiet broker was never pinged"
