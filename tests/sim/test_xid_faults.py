"""The ``xid`` fault: any XID code, with follow-ons, and what NVIDIA's XID catalog says it does to
the job and the GPU (docs/scenarios.md "XID codes"); judged by the console's rules."""

import json
import time

import pytest

from fleetdeck.agents.sim.node import DRAIN_XIDS, WARN_XIDS
from fleetdeck.agents.sim.scenario import parse_scenario
from fleetdeck.agents.sim.spec import SpecError, parse_action, parse_kv, xid_codes
from fleetdeck.console.health import XID_DRAIN, XID_WARN, Verdict
from tests.conftest import run_cli, spawn, stop_process
from tests.sim.harness import Harness, act, job

# Placement is first-fit in name order: job "train" (4 nodes) lands on gpu0001-0004.
TRAIN = job("train", nodes=4, step_time=1.0, checkpoint_every=10)


def xid_run(code: int, then: str | None = None, node: str = "gpu0002", gpu: int = 3,
            ticks: int = 14) -> Harness:
    params: dict[str, object] = {"node": node, "gpu": gpu, "code": code}
    if then is not None:
        params["then"] = then
    h = Harness(actions=[TRAIN, act("xid", 12, **params)])
    h.run(ticks)
    return h


def codes_logged(h: Harness, node: str) -> list[int]:
    return [e.data["xid"] for e in h.events[node] if e.kind == "xid"]


def test_sim_and_console_agree_on_the_xid_classes():
    assert DRAIN_XIDS == XID_DRAIN and WARN_XIDS == XID_WARN


@pytest.mark.parametrize(("entry", "codes"), [
    ({"code": 119, "then": "45"}, [119, 45]),
    ({"code": "94", "then": "63, 45"}, [94, 63, 45]),  # the command line: strings
    ({"code": 95, "then": [63, 45]}, [95, 63, 45]),  # TOML: a list
    ({"code": 13, "then": 43}, [13, 43]),
    ({"code": 79}, [79]),
])
def test_xid_parameters(entry, codes):
    a = parse_action({"fault": "xid", "at": 0, "node": "gpu0001", **entry})
    assert xid_codes(a) == codes


@pytest.mark.parametrize(("entry", "msg"), [
    ({}, "'code' is required"),
    ({"code": 0}, r"code must be in \[1, 999\]"),
    ({"code": 13, "then": "45,x"}, "XID codes"),
    ({"code": 13, "then": "1000"}, r"XID codes in \[1, 999\]"),
    ({"code": 13, "then": [True]}, "XID codes"),
    ({"code": 13, "then": ""}, "1 to 8 XID codes"),
    ({"code": 13, "gpu": 8}, r"gpu must be in \[0, 7\]"),
])
def test_xid_parameter_errors(entry, msg):
    with pytest.raises(SpecError, match=msg):
        parse_action({"fault": "xid", "at": 0, "node": "gpu0001", **entry})


def test_xid_in_a_scenario_and_as_an_injection():
    sc = parse_scenario({"fault": [{"at": "5s", "fault": "xid", "node": "gpu0002", "gpu": 1,
                                    "code": 119, "then": [45]}]})
    assert sc.actions[0].describe() == "xid node=gpu0002 gpu=1 code=119 then=45"
    kv = parse_kv(["node=gpu0003", "gpu=2", "code=94", "then=63,45"])
    a = parse_action({"fault": "xid", **kv}, default_at=0)
    assert a.describe() == "xid node=gpu0003 gpu=2 code=94 then=63,45"


def test_gsp_xid_then_clean_up_fails_the_node_and_the_job():
    h = xid_run(119, "45")
    assert codes_logged(h, "gpu0002") == [119, 45]
    g = h.last["gpu0002"].gpus[3]
    assert g.xid_last == 45 and [x.code for x in g.xids] == [119, 45]
    assert h.verdict("gpu0002") is Verdict.FAILED
    assert [f.text for f in h.findings["gpu0002"] if f.rule == "G2"] == ["XID 119"]
    j = h.job("train")
    assert j.state.value == "F" and "rank 11 on gpu0002 gpu3" in j.reason and "Xid 119" in j.reason
    # The scheduler's node health check agrees: no new work until a reset (repair).
    assert h.node("gpu0002").fatal_reasons(h.world.t) == ["gpu3 XID 119"]
    h.world.apply(act("repair", node="gpu0002"), h.world.t)
    h.run(2)
    assert h.verdict("gpu0002") is Verdict.OK and h.last["gpu0002"].gpus[3].xids == []


@pytest.mark.parametrize("code", [13, 31, 43])
def test_application_xid_crashes_the_job_but_the_node_is_fine(code):
    h = xid_run(code)
    j = h.job("train")
    assert j.state.value == "F" and f"(Xid {code})" in j.reason
    assert h.verdict("gpu0002") is Verdict.OK and h.findings["gpu0002"] == []
    assert h.node("gpu0002").fatal_reasons(h.world.t) == []
    # The node takes work again at once.
    h.world.apply(act("submit", name="next", nodes=16), h.world.t)
    h.run(3)
    assert h.job("next").state.value == "R"


def test_contained_ecc_xid94_kills_the_app_and_leaves_the_gpu_usable():
    h = xid_run(94, "63")
    assert codes_logged(h, "gpu0002") == [94, 63]
    g = h.last["gpu0002"].gpus[3]
    assert g.row_remap.pending is True and g.row_remap.uncorrectable == 1 and g.ecc.dbe_vol == 0
    assert h.verdict("gpu0002") is Verdict.DEGRADED
    assert {"G3", "G6"} == h.rules("gpu0002")
    j = h.job("train")
    assert j.state.value == "F" and "uncorrectable ECC error encountered (Xid 94)" in j.reason
    assert h.node("gpu0002").fatal_reasons(h.world.t) == []


def test_uncontained_ecc_xid95_drains():
    h = xid_run(95, "63,45")
    assert h.verdict("gpu0002") is Verdict.FAILED
    assert [f.text for f in h.findings["gpu0002"] if f.rule == "G2"] == ["XID 95"]
    assert h.job("train").state.value == "F"


def test_xid63_alone_row_remap_pending_without_a_dbe():
    h = xid_run(63)
    g = h.last["gpu0002"].gpus[3]
    assert g.ecc.dbe_vol == 0 and g.row_remap.pending is True and g.row_remap.correctable == 1
    assert h.verdict("gpu0002") is Verdict.DEGRADED and h.rules("gpu0002") == {"G3", "G6"}
    assert h.job("train").state.value == "R"  # running work goes on


@pytest.mark.parametrize("code", [45, 92])
def test_xids_that_leave_the_job_alone(code):
    h = xid_run(code)
    assert h.job("train").state.value == "R"
    assert h.verdict("gpu0002") is (Verdict.DEGRADED if code == 92 else Verdict.OK)


def test_xid79_through_the_xid_fault_is_the_gpu_falling_off_the_bus():
    h = xid_run(79, ticks=13)
    t = h.last["gpu0002"]
    assert t.gpus[3].present is False and "G1" in h.rules("gpu0002")
    h.run(2)
    assert h.job_states(h.job("train").job_id)[:4] == ["PD", "R", "NF", "RQ"]


def test_xid48_counts_a_dbe_and_crashes_the_rank():
    h = xid_run(48, "63")
    g = h.last["gpu0002"].gpus[3]
    assert g.ecc.dbe_vol == 1 and g.row_remap.uncorrectable == 1 and g.row_remap.pending
    assert {"G2", "G4", "G6", "G3"} <= h.rules("gpu0002")
    assert h.job("train").state.value == "F" and "Xid 48" in h.job("train").reason


def xid154_run(action: int | None, then: str = "154") -> Harness:
    params: dict[str, object] = {"node": "gpu0002", "gpu": 3, "code": 95, "then": then}
    if action is not None:
        params["action"] = action
    h = Harness(actions=[TRAIN, act("xid", 12, **params)])
    h.run(14)
    return h


@pytest.mark.parametrize(("action", "verdict", "words"), [
    (None, Verdict.FAILED, "node reboot required"),  # the default: what drivers mostly ask
    (2, Verdict.FAILED, "node reboot required"),
    (4, Verdict.FAILED, "drain and reset"),
    (1, Verdict.FAILED, "GPU reset required"),  # failed by the XID 95 before it
])
def test_xid154_states_its_recovery_action_in_the_log_and_the_sample(action, verdict, words):
    h = xid154_run(action)
    assert codes_logged(h, "gpu0002") == [95, 154]
    said = action if action is not None else 2
    [line] = [e.message for e in h.events["gpu0002"] if e.data.get("xid") == 154]
    assert f"to 0x{said:x} (" in line  # as the real agent's log reader reads it
    [seen] = [x for x in h.last["gpu0002"].gpus[3].xids if x.code == 154]
    assert seen.action == said
    assert h.verdict("gpu0002") is verdict
    if said in (1, 2, 4):
        assert any(f.rule == "G2" and "154" in f.text for f in h.findings["gpu0002"])
        assert f"gpu3 {words}" in h.node("gpu0002").fatal_reasons(h.world.t)


def test_xid154_alone_judged_by_its_action():
    h = Harness(actions=[TRAIN, act("xid", 12, node="gpu0002", gpu=3, code=154, action=3)])
    h.run(14)
    assert h.verdict("gpu0002") is Verdict.DEGRADED and h.rules("gpu0002") == {"G3"}
    assert h.job("train").state.value == "R"  # the XID itself kills nothing
    assert h.node("gpu0002").fatal_reasons(h.world.t) == []
    h.world.apply(act("repair", node="gpu0002"), h.world.t)
    h.run(2)
    assert h.verdict("gpu0002") is Verdict.OK and h.last["gpu0002"].gpus[3].xids == []


def test_an_action_needs_an_xid154():
    with pytest.raises(SpecError, match="code=154 or then=154"):
        parse_action({"fault": "xid", "at": 0, "node": "gpu0001", "code": 95, "action": 2})
    with pytest.raises(SpecError, match=r"action must be in \[0, 7\]"):
        parse_action({"fault": "xid", "at": 0, "node": "gpu0001", "code": 154, "action": 8})


def test_xid_on_an_idle_node_only_logs():
    h = Harness(actions=[act("xid", 2, node="gpu0009", gpu=0, code=13)])
    h.run(4)
    assert codes_logged(h, "gpu0009") == [13] and h.verdict("gpu0009") is Verdict.OK


SCENARIO = """
[[job]]
name = "train"
nodes = 2
steps = 100000
step_time = "1s"

[[fault]]
at = "2s"
fault = "xid"
node = "gpu0005"
gpu = 6
code = 63
"""


def test_xids_through_mosquitto_judged_by_fleetdeck_status(mosquitto, tmp_path):
    url = str(mosquitto.url)
    scenario = tmp_path / "xids.toml"
    scenario.write_text(SCENARIO)
    sim = spawn("sim", "--broker", url, "--cluster", "xid", "--nodes", "6", "--seed", "3",
                "--scenario", str(scenario), log=tmp_path / "sim.log")
    deadline = time.monotonic() + 45

    def inject(*params: str) -> str:
        while True:
            res = run_cli("inject", "--broker", url, "--cluster", "xid", "xid", *params,
                          "--wait", "2")
            if res.returncode == 0 or time.monotonic() > deadline:
                assert res.returncode == 0, res.stderr
                return res.stdout.strip()

    def status() -> dict:
        out = run_cli("status", "--broker", url, "--cluster", "xid", "--json", "--wait", "2")
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    try:
        # The job runs on gpu0001-0002 (first fit): wait until it does.
        while True:
            jobs = {j["name"]: j for j in status()["jobs"]}
            if jobs.get("train", {}).get("state") == "R" or time.monotonic() > deadline:
                break
        assert jobs["train"]["state"] == "R"
        assert inject("node=gpu0003", "gpu=2", "code=119", "then=45") == (
            "injected: xid node=gpu0003 gpu=2 code=119 then=45")
        inject("node=gpu0004", "gpu=1", "code=94", "then=63")
        inject("node=gpu0001", "gpu=5", "code=13")
        while True:
            s = status()
            nodes = {n["id"]: n for n in s["nodes"]}
            jobs = {j["name"]: j for j in s["jobs"]}
            # Every node judged: a 2 s watch can end before a v2 node's keyframe (waiting).
            judged = all(n["verdict"] != "waiting" for n in nodes.values())
            if (judged and nodes["gpu0003"]["verdict"] == "failed" and nodes["gpu0004"]["verdict"]
                    == "degraded" and jobs["train"]["state"] == "F") or time.monotonic() > deadline:
                break
        n3, n4, n1, n5 = (nodes[f"gpu000{i}"] for i in (3, 4, 1, 5))
        # XID 119 then 45: the 45 came last, the 119 still fails the node.
        assert n3["verdict"] == "failed" and "G2" in n3["reasons"]
        assert "G2 gpu2: XID 119" in n3["findings"]
        # XID 94 (contained) then 63: usable, reset when convenient.
        assert n4["verdict"] == "degraded" and set(n4["reasons"]) == {"G3", "G6"}
        # XID 13: the application's fault; the job crashed, the node is fine.
        assert jobs["train"]["state"] == "F" and "(Xid 13)" in jobs["train"]["reason"]
        assert n1["verdict"] == "ok" and n1["reasons"] == []
        # The scenario's XID 63 without a DBE: a pending remap, degraded.
        assert n5["verdict"] == "degraded" and "G6" in n5["reasons"]
        assert any("reset pending: drain when idle, reset, resume" in f for f in n5["findings"])
    finally:
        assert stop_process(sim) == 0


@pytest.mark.parametrize("action", [1, 2, 4])
def test_xid154_alone_with_a_drain_action_kills_the_rank(action):
    """`inject xid code=154 action=1` failed the node in the console while its job stepped on
    (a fault audit): NVIDIA's GPU reset (or reboot) terminates every GPU process first, so the
    rank dies as for the other drain-class XIDs."""
    h = Harness(actions=[TRAIN, act("xid", 12, node="gpu0002", gpu=3, code=154, action=action)])
    h.run(14)
    assert h.verdict("gpu0002") is Verdict.FAILED
    j = h.job("train")
    assert j.state.value == "F" and "Xid 154" in j.reason
