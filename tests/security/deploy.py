"""The shipped deploy/mosquitto setup made real in a temporary directory: users from
mkusers.sh, certificates from mkcerts.sh, and Mosquitto running the shipped mosquitto.conf and
acl (paths and ports adjusted, nothing else)."""

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from fleetdeck.broker import MOSQUITTO, ManagedBroker, free_port
from tests.conftest import REPO

DEPLOY = REPO / "deploy" / "mosquitto"
USERS = ["console", "viewer", "scheduler", "collector", "admin", "gpu0001", "gpu0002"]

needs_tools = pytest.mark.needs("mosquitto", "mosquitto_passwd", "openssl")
"""Skips without these programs, fails instead under CI (tests/conftest.py)."""


@contextmanager
def secured_broker(work: Path, *, users: list[str] = USERS, acl: Path = DEPLOY / "acl",
                   tls_port: int | None = None
                   ) -> Iterator[tuple[ManagedBroker, dict[str, str], int, Path]]:
    """(broker with the plain loopback listener as ``broker.port``, credentials, TLS port, dir)"""
    subprocess.run(["bash", str(DEPLOY / "mkusers.sh"), str(work / "passwd"),
                    str(work / "creds"), *users], check=True, capture_output=True)
    subprocess.run(["bash", str(DEPLOY / "mkcerts.sh"), str(work / "pki"), "127.0.0.1"],
                   check=True, capture_output=True)
    creds = dict(line.split() for line in (work / "creds").read_text().splitlines())
    tls_port = tls_port or free_port()
    conf = (DEPLOY / "mosquitto.conf").read_text()
    conf = (conf.replace("/etc/mosquitto/fleetdeck/passwd", str(work / "passwd"))
            .replace("/etc/mosquitto/fleetdeck/acl", str(acl))
            .replace("/etc/mosquitto/fleetdeck/", str(work / "pki") + "/")
            .replace("listener 8883", f"listener {tls_port} 127.0.0.1")
            .replace("listener 1883 127.0.0.1", "listener {port} 127.0.0.1")
            .replace("persistence true", "persistence false"))
    if os.geteuid() == 0:
        # As root Mosquitto drops to the 'mosquitto' user, which cannot read pytest's private
        # tmp dirs; production installs make the files readable to it instead (docs/security.md).
        conf = "user root\n" + conf
    broker = ManagedBroker(MOSQUITTO, workdir=work, config=conf)
    with broker:
        yield broker, creds, tls_port, work
