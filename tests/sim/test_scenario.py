"""Scenario files, the injection vocabulary, and reproducibility by seed."""

import json

import pytest

from fleetdeck.agents.sim.scenario import builtin_names, load_scenario, parse_scenario
from fleetdeck.agents.sim.spec import SpecError, parse_action, parse_duration, parse_kv
from tests.sim.harness import Harness


@pytest.mark.parametrize(("text", "seconds"), [
    ("30s", 30), ("2m", 120), ("1m30s", 90), ("500ms", 0.5), ("1h", 3600), (12, 12),
    ("7.5", 7.5)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["soon", "-3s", "3 parsecs", "", True, "nan", "1e400",
                                 float("nan"), float("inf")])
def test_bad_durations(bad):
    with pytest.raises(SpecError):
        parse_duration(bad)


def test_actions_validate_kinds_params_and_ranges():
    a = parse_action({"at": "30s", "fault": "ib_flap", "node": "gpu0012", "port": 3, "count": 5})
    assert (a.at, a.kind, a.get("port"), a.get("count"), a.get("down")) == (30, "ib_flap", 3, 5, 2)
    for bad, msg in [
        ({"at": 1, "fault": "meteor", "node": "n"}, "unknown fault"),
        ({"at": 1, "fault": "ib_flap"}, "give node"),
        ({"at": 1, "fault": "ib_flap", "node": "n", "port": 9}, "port must be in"),
        ({"at": 1, "fault": "xid79", "node": "n", "colour": "red"}, "unknown parameter"),
        ({"fault": "xid79", "node": "n"}, "'at' is required"),
        # It read "unknown fault None" (a newcomer wrote the docs' column head, kind).
        ({"at": 1, "kind": "xid79", "node": "n"},
         "'fault' is required: the kind, e.g. fault = \"ib_flap\"; kind = \"xid79\" is no "
         "setting: write fault = \"xid79\""),
        ({"at": 1, "node": "n"}, "'fault' is required: the kind, e.g. fault = \"ib_flap\"$"),
        ({"at": 1, "fault": "link_down", "node": "n", "phys": "Sleep"}, "Polling"),
        # NaN passed every bound: 'inject thermal temp=nan' said "injected", heated nothing.
        ({"at": 1, "fault": "thermal", "node": "n", "temp": "nan"}, "temp must be a finite"),
        ({"at": 1, "fault": "symbol_storm", "node": "n", "rate": float("nan")}, "finite"),
        ({"at": 1, "fault": "thermal", "node": "n", "duration": "nan"},
         "duration must be a duration"),
        ({"at": float("nan"), "fault": "xid79", "node": "n"}, "at must be a finite duration"),
        # A scenario file's 'count = inf' (TOML has it) ended in OverflowError's traceback.
        ({"at": 1, "fault": "ib_flap", "node": "n", "count": float("inf")},
         "count must be an integer"),
        ({"at": 1, "fault": "submit", "name": "j", "steps": float("inf")},
         "steps must be an integer"),
    ]:
        with pytest.raises(SpecError, match=msg):
            parse_action(bad)
    kv = parse_kv(["node=gpu0012", "port=3"])
    assert parse_action({"fault": "link_down", **kv}, default_at=0).get("port") == 3


def test_builtin_demo_scenario_loads():
    assert "demo" in builtin_names()
    sc = load_scenario("demo")
    assert sc.nodes == 64 and sc.hang_timeout_s == 30
    kinds = {a.kind for a in sc.actions}
    assert {"submit", "thermal", "ib_flap", "symbol_storm", "xid79", "agent_death", "ecc_dbe",
            "nvlink", "node_death", "leaf_switch", "repair"} <= kinds
    sizes = sorted(int(a.get("nodes")) for a in sc.actions if a.kind == "submit")
    assert sizes[0] == 1 and sizes[-1] >= 32


def test_scenario_errors_name_the_entry(tmp_path):
    with pytest.raises(SpecError, match=r"\[\[fault\]\] #2"):
        parse_scenario({"fault": [{"at": 1, "fault": "xid79", "node": "a"},
                                  {"at": 2, "fault": "xid80", "node": "a"}]})
    with pytest.raises(SpecError, match="unknown top-level"):
        parse_scenario({"faults": []})
    bad = tmp_path / "bad.toml"
    bad.write_text("[[fault]\n")
    with pytest.raises(SpecError, match="not valid TOML"):
        load_scenario(str(bad))
    with pytest.raises(SpecError, match="no built-in scenario"):
        load_scenario("nosuch")


def test_demo_scenario_runs_every_fault_on_64_nodes():
    sc = load_scenario("demo")
    h = Harness(nodes=64, seed=1, actions=sc.actions, hang_timeout_s=30, judge=False)
    h.run(240)
    assert not [text for _, text in h.world.log if text.startswith("skipped")]
    states = {j.name: j.state.value for j in h.world.scheduler.jobs.values()}
    assert states["eval-harness"] == "CD" and states["rl-ppo"] == "F"
    assert h.job("dlrm-v3").requeues == 1 and h.job("llama3-8b-sweep").state.value == "PD"


def _normalised(payloads: list[bytes]) -> list[dict]:
    out = []
    for raw in payloads:
        msg = json.loads(raw)
        for key in ("ts", "bdSeq"):
            msg.pop(key, None)
        msg.get("agent", {}).pop("pid", None)
        msg.get("agent", {}).pop("collect_ms", None)
        msg.get("agent", {}).pop("started_ts", None)
        for g in msg.get("gpus", []):
            g.pop("xid_last_ts", None)
        out.append(msg)
    return out


def _run(seed: int, ticks: int = 110) -> tuple[list[dict], list[dict]]:
    sc = load_scenario("demo")
    h = Harness(nodes=64, seed=seed, actions=sc.actions, hang_timeout_s=30, judge=False)
    h.run(ticks)
    jobs = [json.loads(s.model_dump_json()) for s in h.jobs]
    for j in jobs:
        for k in ("ts", "submitted_ts", "started_ts", "last_checkpoint_ts"):
            j.pop(k, None)
    return _normalised(h.payloads), jobs


def test_same_seed_same_telemetry_and_job_statuses():
    a_tel, a_jobs = _run(7)
    b_tel, b_jobs = _run(7)
    assert len(a_tel) > 6000
    assert a_tel == b_tel and a_jobs == b_jobs
    c_tel, _ = _run(8, ticks=5)
    assert c_tel != a_tel[: len(c_tel)]


def test_a_rate_table_given_as_a_scenario_says_where_it_goes():
    """"built in: demo, rates-week" offered a rate table that --scenario then refused with
    "unknown top-level key(s) rates" (a newcomer's run)."""
    with pytest.raises(SpecError) as no_such:
        load_scenario("nosuch")
    assert "(built in: demo; or give a .toml path)" in str(no_such.value)
    with pytest.raises(SpecError) as rates:
        load_scenario("rates-week")
    assert "run it with --fault-rates rates-week" in str(rates.value)


@pytest.mark.parametrize("option,what", [("--scenario", "scenario"),
                                         ("--fault-rates", "rate table")])
def test_a_file_that_is_not_utf8_is_one_plain_sentence(tmp_path, capsys, option, what):
    """A scenario or rate table saved as UTF-16 (or a binary file) said Python's codec
    sentence, "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"."""
    from fleetdeck.cli import main

    bad = tmp_path / "utf16.toml"
    bad.write_bytes("[fleet]\nnodes = 4\n".encode("utf-16"))
    assert main(["sim", option, str(bad), "--broker", "mqtt://127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert err == f"fleetdeck sim: {what} '{bad}' is not a UTF-8 text file, as TOML must be.\n"
