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


def test_nodes_not_heard_in_the_watch_are_unknown_not_healthy(capsys):
    """`status --wait 1 --fail-on failed` read 63 of 64 nodes waiting, exit 0, and missed the
    failed ones among them (a newcomer's run): waiting nodes are said on stderr, and with
    --fail-on a fleet with no bad node heard but some not heard at all exits 3 (unseen)."""
    from fleetdeck.console.cli.status import EXIT_UNSEEN, unheard

    fleet = [{"nodes": [node("gpu0001", "ok"), node("gpu0002", "waiting"),
                        node("gpu0003", "waiting")]}]
    waiting = unheard(fleet, 1.0)
    assert waiting == ["gpu0002", "gpu0003"]
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "2 nodes (gpu[0002-0003]) sent no telemetry in the 1 s watch" in err
    assert unhealthy(fleet, None, waiting) == 0
    assert unhealthy(fleet, "failed", waiting) == EXIT_UNSEEN
    fleet[0]["nodes"].append(node("gpu0004", "failed"))
    assert unhealthy(fleet, "failed", waiting) == EXIT_UNHEALTHY  # a bad one heard: page
    assert unheard([{"nodes": [node("gpu0001", "ok")]}], 3.5) == []
    assert capsys.readouterr().err.count("\n") == 1  # the failed node's line only


def test_a_drained_node_not_heard_is_no_reason_to_exit_3(capsys):
    from fleetdeck.console.cli.status import unheard

    fleet = [{"nodes": [node("gpu0001", "ok"), node("gpu0002", "waiting", drain="drained")]}]
    assert unhealthy(fleet, "failed", unheard(fleet, 3.5)) == 0


def test_a_bad_node_seen_before_the_broker_was_lost_still_pages(capsys):
    """A watch that lost its broker exits 3 (unseen), but a failed node it saw before the
    loss is failed all the same: a drill read "failed 2" and exit 3, which a script routes to
    "blind", not "page"."""
    from fleetdeck.console.cli.status import EXIT_UNSEEN, exit_when_cut_off

    out = {"nodes": [node("gpu0001", "ok"), node("gpu0002", "failed")]}
    assert exit_when_cut_off(out, "failed") == EXIT_UNHEALTHY
    assert exit_when_cut_off(out, None) == EXIT_UNSEEN
    assert exit_when_cut_off({"nodes": [node("gpu0001", "ok")]}, "failed") == EXIT_UNSEEN
