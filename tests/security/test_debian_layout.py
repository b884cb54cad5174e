"""The shipped mosquitto.conf where docs/security.md puts it: in Debian's and Ubuntu's
/etc/mosquitto/conf.d/, under their /etc/mosquitto/mosquitto.conf (as the package ships it,
paths moved into a temporary directory). Its persistence_location beside the main file's
stopped Mosquitto at start: "Duplicate persistence_location value in configuration" (a
newcomer's production set-up, copying the docs' commands)."""

import os
import subprocess
from pathlib import Path

from fleetdeck.broker import MOSQUITTO, ManagedBroker, free_port
from tests.security.deploy import DEPLOY, needs_tools

pytestmark = needs_tools

DEBIAN_MAIN = """\
# Place your local configuration in /etc/mosquitto/conf.d/
pid_file {workdir}/mosquitto.pid

persistence true
persistence_location {workdir}/lib/

include_dir {workdir}/conf.d
"""


def test_the_shipped_conf_starts_in_debians_conf_d(tmp_path: Path) -> None:
    subprocess.run(["bash", str(DEPLOY / "mkusers.sh"), str(tmp_path / "passwd"),
                    str(tmp_path / "creds"), "console"], check=True, capture_output=True)
    subprocess.run(["bash", str(DEPLOY / "mkcerts.sh"), str(tmp_path / "pki"), "127.0.0.1"],
                   check=True, capture_output=True)
    (tmp_path / "lib").mkdir()
    (tmp_path / "conf.d").mkdir()
    main = DEBIAN_MAIN
    if os.geteuid() == 0:
        main = "user root\n" + main  # the mosquitto user cannot read pytest's tmp dirs
    broker = ManagedBroker(MOSQUITTO, workdir=tmp_path, config=main)
    conf = ((DEPLOY / "mosquitto.conf").read_text()
            .replace("/etc/mosquitto/fleetdeck/passwd", str(tmp_path / "passwd"))
            .replace("/etc/mosquitto/fleetdeck/acl", str(DEPLOY / "acl"))
            .replace("/etc/mosquitto/fleetdeck/", str(tmp_path / "pki") + "/")
            .replace("listener 8883", f"listener {free_port()} 127.0.0.1")
            .replace("listener 1883 127.0.0.1", f"listener {broker.port} 127.0.0.1"))
    (tmp_path / "conf.d" / "fleetdeck.conf").write_text(conf)
    with broker:  # it listens, or start() raises with Mosquitto's last words
        assert broker.proc is not None and broker.proc.poll() is None
