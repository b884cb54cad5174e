"""deploy/mosquitto/mkusers.sh against a real Mosquitto: one mosquitto_passwd call for every
user (a call per user took 9 s for 256 users, minutes for a 4,096-node fleet), a user added
again gets its new password in place of the old, and a bad name writes nothing."""

import os
import subprocess
import uuid
from pathlib import Path

import aiomqtt
import pytest

from fleetdeck.broker import MOSQUITTO, ManagedBroker
from fleetdeck.brokerurl import BrokerURL, make_client
from tests.security.deploy import DEPLOY, needs_tools

pytestmark = needs_tools


def mkusers(work: Path, *users: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(DEPLOY / "mkusers.sh"), str(work / "passwd"),
                           str(work / "creds"), *users], check=False, capture_output=True,
                          text=True)


async def logs_in(port: int, user: str, password: str) -> bool:
    url = BrokerURL("127.0.0.1", port, username=user, password=password)
    try:
        async with make_client(url, f"t-{uuid.uuid4().hex[:6]}"):
            return True
    except aiomqtt.MqttError:
        return False


async def test_users_made_in_one_go_log_in_and_a_user_made_again_has_its_new_password(
        tmp_path: Path) -> None:
    assert mkusers(tmp_path, "gpu0001", "gpu0002", "console").returncode == 0
    first = dict(line.split() for line in (tmp_path / "creds").read_text().splitlines())
    assert mkusers(tmp_path, "gpu0002", "alice").returncode == 0
    lines = (tmp_path / "creds").read_text().splitlines()
    assert len(lines) == 5  # the credentials file keeps every line it was given
    latest = dict(line.split() for line in lines)
    assert latest["gpu0002"] != first["gpu0002"]
    assert all(len(p) == 24 and p.isalnum() for p in latest.values())
    names = [line.split(":", 1)[0] for line in (tmp_path / "passwd").read_text().splitlines()]
    assert sorted(names) == ["alice", "console", "gpu0001", "gpu0002"]  # gpu0002 once
    assert (tmp_path / "passwd").stat().st_mode & 0o777 == 0o600
    conf = (f"listener {{port}} 127.0.0.1\nallow_anonymous false\n"
            f"password_file {tmp_path / 'passwd'}\n")
    if os.geteuid() == 0:
        conf = "user root\n" + conf  # the mosquitto user cannot read pytest's tmp dirs
    with ManagedBroker(MOSQUITTO, workdir=tmp_path, config=conf) as broker:
        for user, password in latest.items():
            assert await logs_in(broker.port, user, password), user
        assert not await logs_in(broker.port, "gpu0002", first["gpu0002"])


@pytest.mark.parametrize("bad", ["b@d", "-x", ""])
def test_a_bad_name_among_good_ones_writes_nothing(tmp_path: Path, bad: str) -> None:
    done = mkusers(tmp_path, "gpu0001", bad)
    assert done.returncode == 2 and "invalid user name" in done.stderr
    assert not (tmp_path / "passwd").exists() and not (tmp_path / "creds").exists()


async def test_a_name_given_twice_is_made_once(tmp_path: Path) -> None:
    """`mkusers.sh passwd creds gpu0001 gpu0001`: both went into PASSWD_FILE and the credentials
    file with two passwords, the broker taking one of them and the file not saying which."""
    assert mkusers(tmp_path, "gpu0001", "console", "gpu0001").returncode == 0
    names = [line.split(":", 1)[0] for line in (tmp_path / "passwd").read_text().splitlines()]
    assert names == ["gpu0001", "console"]
    creds = [line.split() for line in (tmp_path / "creds").read_text().splitlines()]
    assert [user for user, _ in creds] == ["gpu0001", "console"]
    conf = (f"listener {{port}} 127.0.0.1\nallow_anonymous false\n"
            f"password_file {tmp_path / 'passwd'}\n")
    if os.geteuid() == 0:
        conf = "user root\n" + conf  # the mosquitto user cannot read pytest's tmp dirs
    with ManagedBroker(MOSQUITTO, workdir=tmp_path, config=conf) as broker:
        for user, password in creds:
            assert await logs_in(broker.port, user, password), user


def test_a_new_password_file_is_made_mode_600(tmp_path: Path) -> None:
    """No PASSWD_FILE yet (a first install): made, the users in it, mode 600, no copy left."""
    assert not (tmp_path / "passwd").exists()
    done = mkusers(tmp_path, "gpu0001")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "passwd").read_text().startswith("gpu0001:")
    assert (tmp_path / "passwd").stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["creds", "passwd"]


def test_a_run_that_fails_before_its_rename_leaves_the_file_whole_and_no_copy(
        tmp_path: Path) -> None:
    """The copy filled beside PASSWD_FILE and renamed over it (2a4cfbb) stayed there, every
    user's hash in it, when the run failed or was stopped before the rename (a review); an
    ``mv`` that fails plays that run."""
    assert mkusers(tmp_path, "gpu0001").returncode == 0
    before = (tmp_path / "passwd").read_text()
    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "mv").write_text("#!/bin/sh\nexit 1\n")
    (shims / "mv").chmod(0o755)
    done = subprocess.run(["bash", str(DEPLOY / "mkusers.sh"), str(tmp_path / "passwd"),
                           str(tmp_path / "creds"), "gpu0002"], check=False,
                          capture_output=True, text=True,
                          env={**os.environ, "PATH": f"{shims}:{os.environ['PATH']}"})
    assert done.returncode != 0
    assert (tmp_path / "passwd").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin", "creds", "passwd"]


def test_a_password_file_that_is_a_link_stays_one(tmp_path: Path) -> None:
    """/etc/mosquitto/fleetdeck/passwd a link to where configuration management keeps it: the
    copy renamed over the link (2a4cfbb) made it a file of its own, and the next deploy put the
    old users back (a review). The file it names gets the users; the link stays."""
    (tmp_path / "kept").mkdir()
    (tmp_path / "passwd").symlink_to(tmp_path / "kept" / "passwd")
    assert mkusers(tmp_path, "gpu0001").returncode == 0
    assert mkusers(tmp_path, "gpu0002").returncode == 0
    assert (tmp_path / "passwd").is_symlink()
    names = [line.split(":", 1)[0]
             for line in (tmp_path / "kept" / "passwd").read_text().splitlines()]
    assert names == ["gpu0001", "gpu0002"]
    assert sorted(p.name for p in (tmp_path / "kept").iterdir()) == ["passwd"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes any directory")
def test_a_password_file_in_a_directory_it_cannot_write_is_left_whole_and_said(
        tmp_path: Path) -> None:
    """The file writable, its directory not: the copy cannot be made beside it. Nothing is
    written, and the one sentence says where it could not write."""
    etc = tmp_path / "etc"
    etc.mkdir()
    assert mkusers(tmp_path, "gpu0001").returncode == 0
    (tmp_path / "passwd").rename(etc / "passwd")
    before = (etc / "passwd").read_text()
    etc.chmod(0o500)
    try:
        done = subprocess.run(["bash", str(DEPLOY / "mkusers.sh"), str(etc / "passwd"),
                               str(tmp_path / "creds2"), "gpu0002"], check=False,
                              capture_output=True, text=True)
    finally:
        etc.chmod(0o700)
    assert done.returncode == 1
    assert f"cannot write beside {etc / 'passwd'} in {etc}" in done.stderr
    assert (etc / "passwd").read_text() == before
    assert (tmp_path / "creds2").read_text() == ""
