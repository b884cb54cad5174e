"""A judgement pass with a time budget stops when it is spent and goes on from there on the
next call: a fleet back from stale at once (16,384 nodes after an outage) is judged over
several short slices instead of one 100-170 ms stall, and ends judged exactly as one
unbudgeted pass judges it."""

from fleetdeck.console import session as session_mod
from fleetdeck.console.health import Verdict
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.state import JUDGE_CHUNK, STALE_INTERVALS, FleetState
from fleetdeck.protocol import codec
from fleetdeck.protocol.topics import Kind
from tests.helpers import FakeNode

NODES = 3 * JUDGE_CHUNK + 40
T0 = 1_000_000.0


def _messages(rounds: list[float]) -> list[tuple[str, bytes, float]]:
    """Births and statuses, then one sample of every node at each of ``rounds``."""
    nodes = [FakeNode(f"gpu{i:04d}", t0=T0) for i in range(NODES)]
    out = []
    for n in nodes:
        out.append((n.topic(Kind.BIRTH), codec.encode(n.birth()), T0))
        out.append((n.topic(Kind.STATUS), codec.encode(n.status()), T0))
    for t in rounds:
        for n in nodes:
            n.now = t
            out.append((n.topic(Kind.TELEMETRY), codec.encode(n.agent.telemetry()), t))
    return out


def _fed(msgs: list[tuple[str, bytes, float]], upto: float) -> Ingest:
    ing = Ingest("test")
    for topic, payload, rx in msgs:
        if rx <= upto:
            ing.handle(topic, payload, rx)
    return ing


def _outcome(state: FleetState) -> dict[str, tuple[object, ...]]:
    return {n: (st.verdict, st.stale, st.shape, st.shape_rev) for n, st in state.nodes.items()}


def test_a_budgeted_pass_judges_in_slices_what_one_pass_judges_at_once() -> None:
    msgs = _messages([T0 + 1, T0 + 30])
    whole, sliced = FleetState("test"), FleetState("test")
    for s in (whole, sliced):
        s.apply(_fed(msgs, T0 + 1).take_batch(), T0 + 1)
        assert all(st.verdict is Verdict.OK for st in s.nodes.values())
    # Silence: every node goes stale on the same pass.
    whole.judge(T0 + 20)
    assert whole.last_pass_nodes == NODES and whole.judge_left == 0
    passes = []
    while True:
        sliced.judge(T0 + 20, budget_s=1e-9)  # spent at once: one chunk a call
        passes.append(sliced.last_pass_nodes)
        if not sliced.judge_left:
            break
    assert passes == [JUDGE_CHUNK] * (NODES // JUDGE_CHUNK) + [NODES % JUDGE_CHUNK]
    assert _outcome(sliced) == _outcome(whole)
    assert all(st.stale for st in sliced.nodes.values())
    assert whole.take_transitions() == sliced.take_transitions()  # same order too
    # Back at once: the same, the other way.
    batch = _fed(msgs[-NODES:], T0 + 30).take_batch()
    whole.apply(batch, T0 + 30)
    sliced.apply(_fed(msgs[-NODES:], T0 + 30).take_batch(), T0 + 30, judge=False)
    calls = 0
    while True:
        sliced.judge(T0 + 30, budget_s=1e-9)
        calls += 1
        if not sliced.judge_left:
            break
    assert calls == -(-NODES // JUDGE_CHUNK)
    assert _outcome(sliced) == _outcome(whole)
    assert not any(st.stale for st in sliced.nodes.values())


def test_an_unbudgeted_pass_takes_what_a_budgeted_one_left_as_well() -> None:
    msgs = _messages([T0 + 1])
    state = FleetState("test")
    state.apply(_fed(msgs, T0 + 1).take_batch(), T0 + 1)
    state.judge(T0 + 20, budget_s=1e-9)
    assert state.judge_left == NODES - JUDGE_CHUNK
    state.judge(T0 + 20)  # apply(judge=True) and the headless front ends judge so
    assert state.judge_left == 0 and all(st.stale for st in state.nodes.values())


def test_a_live_session_reports_what_its_pass_left_as_backlog(monkeypatch) -> None:
    monkeypatch.setattr(session_mod, "JUDGE_MIN_S", 1e-9)  # one chunk a tick
    msgs = _messages([T0 + 1, T0 + 30])
    now = [T0 + 1]
    ingest = _fed(msgs, T0 + 1)
    session = ConsoleSession("test", ingest=ingest, follow_up=False, clock=lambda: now[0])
    session.tick()
    session.apply_budget_s = 1e-9  # the floors apply: 64 nodes, JUDGE_MIN_S of judging
    now[0] = T0 + 20
    reports = [session.tick()]
    while reports[-1].backlog:
        reports.append(session.tick())
    assert len(reports) == -(-NODES // JUDGE_CHUNK)
    stale = [tr.node for r in reports for tr in r.verdicts if tr.new is Verdict.STALE]
    assert sorted(stale) == sorted(session.state.nodes)  # each node once, none lost
    assert session.state.judge_left == 0


def test_staleness_deadlines_falling_due_together_are_looked_at_within_the_budget() -> None:
    """Between full passes, the nodes a pass looks at for staleness come from a heap of
    deadlines; 16,384 of them fall due together under a stream. A budgeted pass stops popping
    them when its budget is spent and says so (``judge_left``); later passes go on, and the
    fleet ends judged as one unbudgeted pass judges it."""
    msgs = _messages([T0 + 1])
    whole, sliced = FleetState("test"), FleetState("test")
    for s in (whole, sliced):
        s.apply(_fed(msgs, T0 + 1).take_batch(), T0 + 1)  # a full pass: the next in 10 s
    silent = T0 + 1 + STALE_INTERVALS + 1  # every deadline passed, no full pass due yet
    whole.judge(silent)
    assert all(st.stale for st in whole.nodes.values())
    sliced.judge(silent, budget_s=1e-9)
    due = [n for at, n in sliced._deadlines if at < silent]
    assert due, "the first budgeted pass popped every deadline that fell due"
    assert sliced.judge_left
    calls = 1
    while sliced.judge_left:
        sliced.judge(silent, budget_s=1e-9)
        calls += 1
        assert calls < 10 * NODES
    assert _outcome(sliced) == _outcome(whole)
    assert whole.take_transitions() == sliced.take_transitions()
