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
