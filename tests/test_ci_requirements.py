"""A program the suite needs is a skip on a laptop but a failure on CI (tests/conftest.py), and
.ci/run installs every one of them, and what `make` needs, on a fresh Debian machine."""

import re
import subprocess
import sys

import pytest

from tests.conftest import PACKAGE_OF, REPO, require_binaries

MISSING = "fleetdeck-no-such-program"


def test_a_missing_program_skips_without_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=f"{MISSING} not installed"):
        require_binaries("sh", MISSING)


@pytest.mark.parametrize("value", ["true", "1", "yes"])
def test_a_missing_program_fails_on_ci(monkeypatch, value):
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception, match="CI is set, so this fails instead"):
        require_binaries(MISSING)


@pytest.mark.parametrize("value", ["", "false", "0"])
def test_ci_unset_in_words_is_not_ci(monkeypatch, value):
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.skip.Exception):
        require_binaries(MISSING)


def test_programs_that_are_there_pass_on_ci(monkeypatch):
    monkeypatch.setenv("CI", "true")
    require_binaries("sh")


def test_the_needs_marker_fails_a_whole_module_on_ci(tmp_path):
    (tmp_path / "test_needy.py").write_text(
        "import pytest\n"
        f"pytestmark = pytest.mark.needs({MISSING!r})\n"
        "def test_it():\n"
        "    pass\n")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
           "tests.conftest", "--rootdir", str(tmp_path), str(tmp_path / "test_needy.py")]

    def run(**env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=60,
                              check=False, env={"PATH": "/usr/bin:/bin", **env})

    on_ci = run(CI="true")
    assert on_ci.returncode == 1, on_ci.stdout
    # Failed in set-up, before any fixture ran: pytest counts that as an error.
    assert "1 error" in on_ci.stdout and f"{MISSING} not installed" in on_ci.stdout
    local = run()
    assert local.returncode == 0 and "1 skipped" in local.stdout, local.stdout


def test_ci_run_installs_every_program_the_suite_needs():
    script = (REPO / ".ci" / "run").read_text()
    install = re.search(r"apt-get install -y -qq ([a-z0-9 .+-]+?) >", script)
    assert install is not None
    packages = set(install.group(1).split())
    assert set(PACKAGE_OF.values()) | {"make"} <= packages
    # 'python3 -m venv --help' works without python3-venv on Debian; ensurepip does not.
    assert "import ensurepip" in script and "python3-venv" in script
    assert script.index("apt-get update") < script.index("apt-get install")
    assert 'export CI="${CI:-true}"' in script
