"""A console on digests hears a healthy fleet once a digest period (5 s, ``--digest-every``),
whatever its agents' sample interval: "nothing heard" is judged by the digests' period there,
not by the agents' 1 s (the header and the overview's top problems share ``quiet_s``)."""

from types import SimpleNamespace

from fleetdeck.console.tui.app import FleetdeckApp


def _console(nodes: list[SimpleNamespace], last: float) -> SimpleNamespace:
    feed = SimpleNamespace(conn=SimpleNamespace(state="connected"))
    state = SimpleNamespace(last_update=last, nodes={f"gpu{i:04d}": st
                                                     for i, st in enumerate(nodes, 1)})
    return SimpleNamespace(session=SimpleNamespace(feed=feed), state=state)


def test_a_digest_console_between_digests_is_not_quiet() -> None:
    digest = SimpleNamespace(every_s=10.0)
    nodes = [SimpleNamespace(online=True, interval_s=1.0, digest=digest) for _ in range(4)]
    app = _console(nodes, last=1000.0)
    # 8 s after the last wave of a collector's 10 s digests: the next is not due.
    assert FleetdeckApp.quiet_s(app, 1008.0) is None  # type: ignore[arg-type]
    # Two periods and more with nothing: said, as on raw telemetry.
    assert FleetdeckApp.quiet_s(app, 1021.0) == 21.0  # type: ignore[arg-type]


def test_raw_telemetry_is_quiet_after_two_sample_intervals() -> None:
    nodes = [SimpleNamespace(online=True, interval_s=1.0, digest=None) for _ in range(4)]
    app = _console(nodes, last=1000.0)
    assert FleetdeckApp.quiet_s(app, 1004.0) is None  # type: ignore[arg-type]
    assert FleetdeckApp.quiet_s(app, 1006.0) == 6.0  # type: ignore[arg-type]
