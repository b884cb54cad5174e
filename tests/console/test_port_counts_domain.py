"""The fleet's IB port counts (``rows.fleet_counts``: the overview's "IB ports N down D
erroring E unknown U") count each port once, by what it is now: a port that is down is down,
though its ``link_downed`` moved (N2) as it went; "erroring" is for ports that are up and
erroring or flapping. A replayed leaf-switch failure (eight rails of a 16-node leaf group down)
read "down 64  erroring 64" of 128 ports."""

from pathlib import Path

import pytest

from fleetdeck.console.replay import run_headless
from fleetdeck.console.rows import fleet_counts

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.mark.parametrize(("fixture", "down", "erroring"), [
    ("leaf_switch", 64, 0),   # every port of leaf02 down, each with N2: down only
    ("link_down", 1, 0),      # one port down (N1, N2)
    ("ib_flap", 0, 1),        # up again between flaps: flapping counts as erroring
    ("symbol_storm", 0, 1),   # up, symbol errors (N3/N4)
])
def test_each_port_is_counted_once_by_what_it_is_now(fixture, down, erroring):
    state = run_headless(FIXTURES / f"{fixture}.jsonl.gz").session.state
    c = fleet_counts(state)
    assert (c.ports, c.ports_down, c.ports_erroring, c.ports_unknown) == (128, down, erroring, 0)
    assert c.ports_down + c.ports_erroring <= c.ports


@pytest.mark.parametrize(("downs", "status"), [(3, "flapping"), (2, "flapping"),
                                               (1, "erroring"), (0, "erroring")])
def test_a_port_up_again_after_flaps_in_the_hour_is_flapping(downs, status):
    """`inject ib_flap count=3`, then the flaps over: the fabric views called the port
    "erroring" (▲, FLAP column empty) for the hour N2 held it (a 3 a.m. drive). Its link going
    down twice or more in the agent's hour is a flapping port; once (a switch that rebooted)
    is a port that erred and recovered."""
    from fleetdeck.console.health import Finding, Severity
    from fleetdeck.console.judgements import port_status
    from fleetdeck.protocol.fast import IbPortSample

    port = IbPortSample(dev="mlx5_ib3", port=1, state="ACTIVE", phys_state="LinkUp",
                        link_downed=downs, errors_1h={"link_downed": downs} if downs else {})
    n2 = Finding("N2", Severity.DRAIN, "mlx5_ib3:1", "link_downed increased")
    assert port_status(port, [n2]) == status
