"""R in the live console records what it receives; the file replays to the same picture."""

from fleetdeck.console.replay import replay_headless
from fleetdeck.console.tui.app import FleetdeckApp
from tests.conftest import eventually, spawn, stop_process


async def test_record_toggle_in_the_console(mosquitto, tmp_path):
    agent = spawn("agent", "--broker", str(mosquitto.url), "--cluster", "rec", "--node-id",
                  "gpu0001", log=tmp_path / "agent.log")
    app = FleetdeckApp(cluster="rec", url=mosquitto.url, audit_path=tmp_path / "audit.jsonl",
                       tick_s=0.2)
    app.record_dir = tmp_path
    notes: list[str] = []
    app.notify = lambda text, **_kw: notes.append(str(text))  # type: ignore[method-assign]
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            await eventually(lambda: "gpu0001" in app.state.nodes
                             and app.state.nodes["gpu0001"].telemetry is not None, 15,
                             message="agent seen")
            await pilot.press("R")
            assert app.recorder is not None
            assert "RECORDING" in app.header_text(app.clock())
            await eventually(lambda: app.recorder is not None and app.recorder.messages >= 3,
                             15, message="a few messages recorded")
            await pilot.press("R")
            assert app.recorder is None
            assert "RECORDING" not in app.header_text(app.clock())
    finally:
        stop_process(agent)
    files = list(tmp_path.glob("fleetdeck-rec-*.jsonl.gz"))
    assert len(files) == 1
    # The file's name on a line of its own, whole (the path broke mid-word in the toast).
    assert any(f"\n{files[0].name}\nin {tmp_path}" in n for n in notes), notes
    out = replay_headless(files[0])
    assert [n["id"] for n in out["nodes"]] == ["gpu0001"]
    node = out["nodes"][0]
    # The birth came before R was pressed: the first keyframe carries it.
    assert node["verdict"] == "ok" and node["gpus_expected"] == 8 and node["online"]
