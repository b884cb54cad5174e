"""The wheel installs one top-level package, ``fleetdeck``: console/ and agents/ travel inside it
as ``fleetdeck.console`` and ``fleetdeck.agents``, so a distribution that owns a top-level
``agents`` (a popular agent SDK does) installs next to it and both import."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.conftest import REPO

DUMMY_PYPROJECT = """
[build-system]
requires = ["setuptools>=77"]
build-backend = "setuptools.build_meta"
[project]
name = "dummy-agents-sdk"
version = "1.0"
[tool.setuptools]
packages = ["agents"]
"""


def _wheel(src: Path, out: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(out), str(src)], check=True,
                   capture_output=True, cwd=out)
    (wheel,) = out.glob("*.whl")
    return wheel


def test_wheel_installs_under_one_namespace_beside_a_top_level_agents(tmp_path):
    # Build from a copy: setuptools builds in the source tree, and the links travel as links.
    src = tmp_path / "fleetdeck-src"
    src.mkdir()
    for name in ("fleetdeck", "console", "agents"):
        shutil.copytree(REPO / name, src / name, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    build = tmp_path / "build"
    build.mkdir()
    ours = _wheel(src, build)
    names = zipfile.ZipFile(ours).namelist()
    assert {n.split("/")[0] for n in names if not n.startswith("fleetdeck-")} == {"fleetdeck"}
    assert "fleetdeck/console/tui/fleetdeck.tcss" in names
    assert "fleetdeck/agents/scenarios/demo.toml" in names

    dummy = tmp_path / "dummy-agents-sdk"
    (dummy / "agents").mkdir(parents=True)
    (dummy / "pyproject.toml").write_text(DUMMY_PYPROJECT)
    (dummy / "agents" / "__init__.py").write_text("SDK = 'the other agents'\n")
    other = tmp_path / "other"
    other.mkdir()
    theirs = _wheel(dummy, other)

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    "--target", str(site), str(ours), str(theirs)], check=True,
                   capture_output=True)
    # Third-party dependencies come from the test environment, appended after the fresh venv
    # (PYTHONPATH does not run .pth files, so the editable checkout is not seen).
    deps = next(p for p in sys.path if p.endswith("site-packages"))
    probe = (
        "import agents, fleetdeck, fleetdeck.agents.agent, fleetdeck.console.state, "
        "fleetdeck.console.tui.app, fleetdeck.cli\n"
        "assert agents.SDK == 'the other agents', agents.__file__\n"
        f"assert fleetdeck.__file__.startswith({str(venv)!r}), fleetdeck.__file__\n"
        "print(fleetdeck.console.state.__name__, fleetdeck.agents.agent.__name__)\n"
    )
    out = subprocess.run([str(venv / "bin" / "python"), "-c", probe], check=False,
                         capture_output=True,
                         text=True, env={"PYTHONPATH": deps, "PATH": "/usr/bin:/bin"},
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["fleetdeck.console.state", "fleetdeck.agents.agent"]
