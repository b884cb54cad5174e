"""docs/security.md's shell blocks, run as written by an administrator who is not root: each
line without ``sudo`` as an unprivileged user, each ``sudo`` one as root, /etc/mosquitto and
/var/log/mosquitto moved into a temporary directory, systemctl and editor stubbed. The scripts
were shown without sudo where they write into Mosquitto's directory (a newcomer's run: "cannot
write beside /etc/mosquitto/fleetdeck/passwd"), and the bridge's ACL was appended with a
``>>`` only root may do. Then Mosquitto, as its own user, starts on what they made."""

import os
import pwd
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from fleetdeck.broker import MOSQUITTO, ManagedBroker, free_port
from tests.conftest import REPO
from tests.security.deploy import needs_tools

DOC = REPO / "docs" / "security.md"
USER = "nobody"


def _cannot_run() -> str:
    """Why this machine cannot run the doc's blocks as written ('' when it can)."""
    if os.geteuid() != 0:
        return "needs root: the doc's sudo lines run as root, the others as 'nobody'"
    if shutil.which("setpriv") is None:
        return "needs setpriv, to run the doc's lines without sudo as 'nobody'"
    for user in (USER, "mosquitto"):
        try:
            pwd.getpwnam(user)
        except KeyError:
            return f"needs the user '{user}' (the doc's administrator, Mosquitto's own)"
    return ""


SYSTEM_PATH = re.compile(r"(?<![\w./~-])/(?:etc|var|usr|opt|srv|run|lib|lib64|boot|root|home)/")
"""An absolute path of the machine itself (``/dev/null`` passes): run as root, a doc line that
still named one after the mapping into the test's root wrote the real system."""


def _line(raw: str, root: Path) -> str:
    """``raw`` with Mosquitto's directories moved under ``root``; a line that still names a
    path of the machine's own fails the test before anything runs: the blocks run as root,
    and a new doc line (an agent.env under /etc/fleetdeck) would have written the real one."""
    line = (raw.replace("/etc/mosquitto", f"{root}/etc/mosquitto")
            .replace("/var/log/mosquitto", f"{root}/var/log/mosquitto")
            .replace("gpu[0001-4096]", "gpu[0001-0004]"))
    hit = SYSTEM_PATH.search(line.replace(str(root), "ROOT"))
    if hit and not line.lstrip().startswith("#"):
        pytest.fail(f"docs/security.md names {hit.group(0)}… outside the test's root; map it "
                    f"in _line before this runs as root: {raw.strip()}")
    return line


def _blocks() -> list[str]:
    return re.findall(r"```sh\n(.*?)```", DOC.read_text(), re.S)


def _script(blocks: list[str], root: Path, home: Path) -> str:
    """One bash script: ``sudo`` a function (root), the other command lines through setpriv as
    the administrator, an assignment in the script's own shell (it only reads)."""
    uid = pwd.getpwnam(USER)
    shim = root / "bin"
    lines = ["set -euo pipefail",
             f"export PATH={shim}:$PATH HOME={home} USER={USER}",
             'sudo() { "$@"; }',
             f'as_user() {{ setpriv --reuid={uid.pw_uid} --regid={uid.pw_gid} --clear-groups '
             'bash -euo pipefail -c "$1"; }']
    for block in blocks:
        for raw in block.splitlines():
            line = _line(raw, root)
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if line.startswith("sudo "):
                lines.append(line)
            elif re.match(r"[A-Za-z_]\w*=", line):
                lines += [line, f"export {line.split('=', 1)[0]}"]
            else:
                lines.append(f"as_user {shlex.quote(line)}")
    return "\n".join(lines) + "\n"


def _connack(port: int, user: str, password: str) -> int:
    """The return code of Mosquitto's CONNACK to an MQTT 3.1.1 CONNECT as ``user``."""
    def field(text: str) -> bytes:
        raw = text.encode()
        return len(raw).to_bytes(2, "big") + raw

    body = field("MQTT") + bytes([4, 0xC2, 0, 30]) + field("secdoc") + field(user) + field(password)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(bytes([0x10, len(body)]) + body)
        answer = sock.recv(4)
    return answer[3]


@needs_tools
@pytest.mark.skipif(bool(_cannot_run()), reason=_cannot_run() or "runs")
def test_the_docs_commands_run_as_written_by_an_administrator() -> None:
    root = Path(tempfile.mkdtemp(prefix="fleetdeck-secdoc-"))
    try:
        root.chmod(0o755)  # Mosquitto's user and the administrator pass through it
        home = root / "home"
        home.mkdir()
        shutil.chown(home, USER)
        (root / "etc" / "mosquitto" / "conf.d").mkdir(parents=True)
        (root / "var" / "log" / "mosquitto").mkdir(parents=True)
        (root / "var" / "log" / "mosquitto" / "mosquitto.log").touch()
        shim = root / "bin"
        shim.mkdir()
        for stub in ("systemctl", "editor"):
            (shim / stub).write_text("#!/bin/sh\nexit 0\n")
            (shim / stub).chmod(0o755)
        (shim / "python3").symlink_to(sys.executable)
        checkout = home / "fleetdeck"  # "in a checkout of fleetdeck", the administrator's
        checkout.mkdir()
        shutil.chown(checkout, USER)
        # A copy the administrator owns: a link into this repository failed as 'nobody'
        # wherever the repository sits in a folder only root may enter (/root, under CI).
        shutil.copytree(REPO / "deploy", checkout / "deploy")
        subprocess.run(["chown", "-R", USER, str(checkout / "deploy")], check=True)
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        script = _script(_blocks(), root, home)
        done = subprocess.run(["bash", "-c", script], cwd=checkout, env=env, check=False,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (done.stderr, script)
        assert (checkout / "out" / "bridge-b.conf").is_file()
        etc = root / "etc" / "mosquitto" / "fleetdeck"
        creds = subprocess.run(
            ["setpriv", f"--reuid={pwd.getpwnam(USER).pw_uid}", "--clear-groups",
             f"--regid={pwd.getpwnam(USER).pw_gid}", "cat", str(home / "fleetdeck-creds")],
            check=False, capture_output=True, text=True)
        assert creds.returncode == 0, "the administrator cannot read the passwords made"
        users = dict(line.split() for line in creds.stdout.splitlines())
        assert {"console", "gpu0004", "alice", "bridge-b"} <= set(users)
        assert "user bridge-b" in (etc / "acl").read_text()
        assert not (etc / "ca.key").exists()
        conf = ((root / "etc" / "mosquitto" / "conf.d" / "fleetdeck.conf").read_text()
                .replace("/etc/mosquitto", f"{root}/etc/mosquitto")
                .replace("listener 8883", f"listener {free_port()} 127.0.0.1")
                .replace("listener 1883 127.0.0.1", "listener {port} 127.0.0.1")
                .replace("persistence true", "persistence false"))
        # As root, Mosquitto drops to its own user: it reads what the chown gave it.
        work = root / "broker"
        work.mkdir()
        shutil.chown(work, "mosquitto")
        with ManagedBroker(MOSQUITTO, workdir=work, config=conf) as broker:
            assert broker.proc is not None and broker.proc.poll() is None
            assert _connack(broker.port, "console", users["console"]) == 0
            assert _connack(broker.port, "console", "wrong") == 5  # not authorised
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_doc_line_naming_a_real_system_path_fails_before_running(tmp_path: Path) -> None:
    """The blocks run as root: a line the mapping leaves on the real /etc is refused, not run."""
    root = tmp_path / "r"
    assert _line("sudo cp deploy/mosquitto/acl /etc/mosquitto/fleetdeck/acl", root) == (
        f"sudo cp deploy/mosquitto/acl {root}/etc/mosquitto/fleetdeck/acl")
    assert _line("sudo tee -a x < y > /dev/null", root).endswith("/dev/null")
    for raw in ("sudo install -m 600 agent.env /etc/fleetdeck/agent.env",
                "sudo tail /var/lib/mosquitto/mosquitto.db",
                'deploy/mosquitto/mkcerts.sh "/etc/ssl/private" broker'):
        with pytest.raises(pytest.fail.Exception, match="outside the test's root"):
            _line(raw, root)
