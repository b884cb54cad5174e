"""``status --fail-on``: which nodes make it exit 1."""

from fleetdeck.console.cli.status import EXIT_UNHEALTHY, unhealthy


def node(name: str, verdict: str, drain: str = "none") -> dict[str, str]:
    return {"id": name, "verdict": verdict, "drain": drain}


def test_fail_on_counts_bad_nodes_nobody_acted_on(capsys):
    fleet = [{"nodes": [node("gpu0001", "ok"), node("gpu0002", "degraded"),
                        node("gpu0003", "failed", drain="drained"),
                        node("gpu0004", "offline", drain="draining")]}]
    assert unhealthy(fleet, None) == 0
    assert unhealthy(fleet, "failed") == 0  # the failed ones are drained or draining
    assert unhealthy(fleet, "degraded") == EXIT_UNHEALTHY
    assert "1 node(s) degraded or worse (gpu0002; --fail-on degraded)" in capsys.readouterr().err
    fleet[0]["nodes"].append(node("gpu0005", "stale"))
    assert unhealthy(fleet, "failed") == 0 and unhealthy(fleet, "degraded") == EXIT_UNHEALTHY
