"""Rendezvous hashing and the collector's scope: pure, no broker."""

import pytest

from fleetdeck.console.shard import (
    MEMBER_SILENT_S,
    REANNOUNCE_GRACE_S,
    ShardScope,
    assign,
    owner,
    parse_shard,
    weight,
)
from fleetdeck.console.state import AGENT_RECONNECT_S, WILL_BURST_S
from fleetdeck.errors import UserError
from fleetdeck.protocol.messages import CollectorStatus

NODES = [f"gpu{i:05d}" for i in range(1, 4097)]


def members(n: int) -> list[str]:
    return [f"shard-{k}" for k in range(1, n + 1)]


@pytest.mark.parametrize("n", [1, 2, 3, 4, 8])
def test_every_node_has_exactly_one_owner_and_shares_are_even(n):
    owners = assign(NODES, members(n))
    assert set(owners) == set(NODES)
    counts = {m: sum(1 for o in owners.values() if o == m) for m in members(n)}
    fair = len(NODES) / n
    assert all(abs(c - fair) < 0.15 * fair for c in counts.values()), counts


@pytest.mark.parametrize("n", [2, 3, 4, 7])
def test_adding_a_collector_moves_about_one_nth_and_only_to_it(n):
    before = assign(NODES, members(n))
    after = assign(NODES, members(n + 1))
    moved = [node for node in NODES if before[node] != after[node]]
    assert all(after[node] == f"shard-{n + 1}" for node in moved), "nodes moved between old ones"
    share = len(moved) / len(NODES)
    assert abs(share - 1 / (n + 1)) < 0.05, share


def test_losing_a_collector_moves_only_its_nodes():
    before = assign(NODES, members(4))
    after = assign(NODES, [m for m in members(4) if m != "shard-3"])
    for node in NODES:
        if before[node] != "shard-3":
            assert after[node] == before[node]
        else:
            assert after[node] != "shard-3"


def test_the_weight_is_stable_across_processes():
    # blake2b of "member\0node": a fixed value, unlike the salted hash().
    assert weight("shard-1", "gpu0001") == weight("shard-1", "gpu0001")
    assert weight("shard-1", "gpu0001") != weight("shard-2", "gpu0001")
    assert owner("gpu0001", []) is None
    assert owner("gpu0001", ["a", "b"]) == owner("gpu0001", ["b", "a"])


def status(who: str, online: bool, started: int = 1000) -> CollectorStatus:
    return CollectorStatus(collector=who, online=online, started=started, ts=started)


def test_scope_follows_births_and_wills():
    scope = ShardScope("shard-1", 500)
    for node in NODES[:300]:
        scope.learn(node)
    gained, lost = scope.take_changes()
    assert gained == set(NODES[:300]) and not lost  # alone: it owns everything
    assert scope.observe(status("shard-2", True), 1.0)
    gained, handed = scope.take_changes()
    assert not gained and handed and scope.owned == set(NODES[:300]) - handed
    assert {n for n in NODES[:300] if owner(n, ["shard-1", "shard-2"]) == "shard-2"} == handed
    # A late will of an older shard-2 process changes nothing; its current will does.
    assert not scope.observe(status("shard-2", False, started=999), 2.0)
    assert scope.live == ("shard-1", "shard-2")
    assert not scope.observe(status("shard-2", False), 3.0)
    assert not scope.settle(3.0 + WILL_BURST_S - 0.1, None, 0.0)  # a broker's shutdown burst?
    assert scope.settle(3.0 + WILL_BURST_S, None, 0.0)
    gained, lost = scope.take_changes()
    assert gained == handed and not lost  # it takes back exactly what shard-2 held
    assert scope.owned == set(NODES[:300])
    # Its own retained birth (or an old will of itself) never makes it give up nodes.
    assert not scope.observe(status("shard-1", False, started=1), 4.0)
    assert scope.owns(NODES[0])


def test_a_twin_under_the_same_id_is_noticed_and_an_old_will_is_not():
    scope = ShardScope("shard-1", 500)
    scope.observe(status("shard-1", False, started=100), 1.0)  # the will of an earlier run
    assert scope.twin is None
    scope.observe(status("shard-1", True, started=500), 1.0)  # its own birth
    assert scope.twin is None
    scope.observe(status("shard-1", True, started=900), 2.0)  # another process as shard-1
    assert scope.twin is not None and scope.twin.started == 900


def test_gained_then_lost_before_asked_is_neither():
    scope = ShardScope("shard-1", 500)
    scope.observe(status("shard-2", True), 1.0)
    node = next(n for n in NODES if owner(n, ["shard-1", "shard-2"]) == "shard-2")
    assert not scope.learn(node)
    scope.observe(status("shard-2", False), 2.0)
    scope.settle(2.0 + WILL_BURST_S, None, 0.0)
    scope.observe(status("shard-2", True, started=2000), 3.0)
    gained, lost = scope.take_changes()
    assert node not in gained and node not in lost


def two_collectors() -> tuple[ShardScope, set[str]]:
    scope = ShardScope("shard-1", 500)
    for node in NODES[:300]:
        scope.learn(node)
    scope.observe(status("shard-2", True), 1.0)
    scope.take_changes()
    return scope, set(scope.owned)


def test_a_peer_will_just_before_the_broker_went_is_not_a_takeover():
    """A graceful broker shutdown sends every client's will: the peer's arrives, then this
    collector loses the broker too. It must not take over the peer's nodes (found in a drill,
    2026-12-04: three collectors each took the whole fleet over on every Mosquitto restart)."""
    scope, mine = two_collectors()
    scope.observe(status("shard-2", False), 10.0)
    blind_open = (10.3, None)  # this collector's own connection went 0.3 s later
    for now in (10.5, 12.5, 20.0, 60.0):
        assert not scope.settle(now, blind_open, None)
    back = (10.3, 15.0 + AGENT_RECONNECT_S)  # reconnected at 15 s
    assert not scope.settle(16.0, back, 15.0)
    scope.observe(status("shard-2", True), 17.0)  # the peer announced itself again
    assert not scope.settle(15.0 + AGENT_RECONNECT_S + 1, back, 15.0)
    assert scope.live == ("shard-1", "shard-2") and scope.take_changes() == (set(), set())
    assert scope.wills_unbelieved == 1
    assert scope.owned == mine


def test_a_peer_that_does_not_come_back_after_the_broker_does_is_taken_over():
    scope, mine = two_collectors()
    scope.observe(status("shard-2", False), 10.0)
    back = (10.3, 15.0 + AGENT_RECONNECT_S)
    assert not scope.settle(15.0 + AGENT_RECONNECT_S - 0.1, back, 15.0)
    assert scope.settle(15.0 + AGENT_RECONNECT_S, back, 15.0)
    gained, lost = scope.take_changes()
    assert gained == set(NODES[:300]) - mine and not lost


def test_a_retained_will_again_after_a_reconnect_keeps_its_first_arrival():
    """A persistent broker keeps the peer's shutdown will retained and sends it again when
    this collector re-subscribes: the peer still has until the blind's end to come back."""
    scope, _ = two_collectors()
    scope.observe(status("shard-2", False), 10.0)
    back = (10.3, 15.0 + AGENT_RECONNECT_S)
    scope.observe(status("shard-2", False), 15.1)  # re-delivered on re-subscribing
    assert scope.members["shard-2"].seen_at == 10.0
    assert not scope.settle(20.0, back, 15.0)


@pytest.mark.parametrize("text", ["3", "0/2", "3/2", "a/b", "1/2/3", ""])
def test_a_bad_shard_is_one_sentence(text):
    with pytest.raises(UserError, match="--shard"):
        parse_shard(text)


def test_shard_spec():
    spec = parse_shard(" 2/3 ")
    assert (spec.index, spec.count, spec.member, str(spec)) == (2, 3, "shard-2", "2/3")


def test_a_bad_shard_on_the_command_line_is_one_sentence(tmp_path):
    from tests.conftest import run_cli

    res = run_cli("collect", "--broker", "mqtt://127.0.0.1:1", "--cluster", "x", "--shard",
                  "4/3", "--db", str(tmp_path / "x.db"))
    assert res.returncode == 2
    assert res.stderr.strip() == "fleetdeck collect: --shard 4/3: K must be between 1 and N"


def test_digest_every_without_a_shard_is_refused_in_one_sentence(tmp_path):
    # A plain collector sends no digests: 'collect --digest-every 5' started one on the
    # default store and said nothing of the option (a newcomer's run).
    from tests.conftest import run_cli

    res = run_cli("collect", "--broker", "mqtt://127.0.0.1:1", "--cluster", "x",
                  "--digest-every", "10", "--db", str(tmp_path / "x.db"))
    assert res.returncode == 2
    assert res.stderr.strip() == ("fleetdeck collect: --digest-every goes with --shard K/N: a "
                                  "collector without --shard sends no digests.")
    assert not (tmp_path / "x.db").exists()


def test_a_peer_that_dies_after_an_old_outage_is_taken_over_as_usual():
    scope, mine = two_collectors()
    long_ago = (10.3, 15.0 + AGENT_RECONNECT_S)
    scope.observe(status("shard-2", False), 100.0)  # SIGKILLed, well after the outage
    assert not scope.settle(100.0 + WILL_BURST_S - 0.1, long_ago, 15.0)
    assert scope.settle(100.0 + WILL_BURST_S, long_ago, 15.0)
    gained, _ = scope.take_changes()
    assert gained == set(NODES[:300]) - mine


def test_a_peer_killed_while_the_broker_was_down_is_taken_over():
    """A broker crash and a collector gone with it (one host ran both): no will, and a
    non-persistent broker comes back without its retained birth. Its nodes were orphaned for
    good (found in a drill, 2026-12-04: status --digests showed 14 of 24 nodes)."""
    scope, mine = two_collectors()  # shard-2 announced at 1.0
    back = (10.3, 15.0 + AGENT_RECONNECT_S)  # this collector reconnected at 15 s
    assert not scope.settle(15.0 + REANNOUNCE_GRACE_S - 0.1, back, 15.0)
    assert scope.settle(15.0 + REANNOUNCE_GRACE_S, back, 15.0)
    assert scope.live == ("shard-1",)
    gained, _ = scope.take_changes()
    assert gained == set(NODES[:300]) - mine
    # It comes back after all: it owns its nodes again.
    assert scope.observe(status("shard-2", True, started=5000), 60.0)
    _, lost = scope.take_changes()
    assert lost == gained


def test_a_peer_heard_again_after_a_reconnect_keeps_its_nodes():
    """This collector alone lost the broker: the broker re-sends the peers' retained births
    when it re-subscribes; after a broker restart the peers announce themselves."""
    scope, mine = two_collectors()
    back = (10.3, 15.0 + AGENT_RECONNECT_S)
    scope.observe(status("shard-2", True), 15.2)
    for now in (20.0, 15.0 + REANNOUNCE_GRACE_S, 15.0 + REANNOUNCE_GRACE_S + 10):
        assert not scope.settle(now, back, 15.0)
    assert scope.owned == mine


def test_a_peer_silent_for_two_announcements_is_gone_but_not_while_this_one_is_blind():
    scope, _ = two_collectors()  # shard-2 announced at 1.0, this one connected at 0.0
    scope.observe(status("shard-2", True), 31.0)  # its periodic announcement
    assert not scope.settle(31.0 + MEMBER_SILENT_S, None, 0.0)
    stalled = (40.0, 31.0 + MEMBER_SILENT_S + 5)  # this collector did not run for a while
    assert not scope.settle(31.0 + MEMBER_SILENT_S + 1, stalled, 0.0)
    assert scope.settle(31.0 + MEMBER_SILENT_S + 5, stalled, 0.0)
    assert scope.live == ("shard-1",)


def test_a_collector_outliving_its_twin_is_live_again_at_its_next_announcement():
    # Two processes ran as shard-1; the newer one was killed and its will made shard-1 gone.
    # The older one kept running, but its births were ignored as "older" than that will: the
    # peers owned its nodes for good while it kept publishing their digests (an SRE drill).
    peer = ShardScope("shard-2", 500)
    for node in NODES[:300]:
        peer.learn(node)
    peer.observe(status("shard-1", True, started=100), 1.0)
    peer.observe(status("shard-1", True, started=900), 2.0)  # the twin
    peer.observe(status("shard-1", False, started=900), 3.0)  # the twin's will
    assert peer.settle(3.0 + WILL_BURST_S, None, 0.0)
    assert peer.live == ("shard-2",)
    assert peer.observe(status("shard-1", True, started=100), 30.0)  # the older one announces
    assert peer.live == ("shard-1", "shard-2")
    # While the newer twin lives, the older one's birth changes nothing; an older will never.
    peer.observe(status("shard-1", True, started=900), 31.0)
    assert not peer.observe(status("shard-1", True, started=100), 32.0)
    assert not peer.observe(status("shard-1", False, started=100), 33.0)
    assert peer.live == ("shard-1", "shard-2")
    # The survivor learns that the twin's will replaced its retained birth: it re-announces.
    me = ShardScope("shard-1", 100)
    me.observe(status("shard-1", True, started=900), 2.0)
    assert not me.clobbered
    me.observe(status("shard-1", False, started=900), 3.0)
    assert me.clobbered
