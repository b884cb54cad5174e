"""`fleetdeck agent` takes the console's TLS settings: --ca/--cert/--key, $FLEETDECK_CA/CERT/KEY
and ca/cert/key in the TOML file; a bad combination is one sentence at start."""

import json
import shutil
import subprocess

import pytest

from tests.conftest import run_cli
from tests.security.deploy import DEPLOY, needs_tools


@needs_tools
def test_tls_files_from_flags_environment_and_file(tmp_path, monkeypatch):
    # Real certificates: their contents are checked at start too (a --ca that holds none is
    # one sentence, tests/security/test_tls_file_contents.py).
    for pki, clients in (("pki", ["node"]), ("other", [])):
        subprocess.run(["bash", str(DEPLOY / "mkcerts.sh"), str(tmp_path / pki), "broker",
                        *clients], check=True, capture_output=True)
    for src, name in (("pki/ca.crt", "ca.crt"), ("pki/node.crt", "node.crt"),
                      ("pki/node.key", "node.key"), ("other/ca.crt", "other-ca.crt")):
        shutil.copy(tmp_path / src, tmp_path / name)
    cfg = tmp_path / "agent.toml"
    cfg.write_text(f'broker = "mqtts://gpu0001:pw@broker:8883"\nca = "{tmp_path}/other-ca.crt"\n'
                   f'cert = "{tmp_path}/node.crt"\nkey = "{tmp_path}/node.key"\n')
    monkeypatch.setenv("FLEETDECK_CA", str(tmp_path / "ca.crt"))
    res = run_cli("agent", "--config", str(cfg), "--check-config")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    # environment over file, as for every other setting
    assert (out["ca"], out["cert"], out["key"]) == (
        str(tmp_path / "ca.crt"), str(tmp_path / "node.crt"), str(tmp_path / "node.key"))
    res = run_cli("agent", "--config", str(cfg), "--check-config", "--ca",
                  str(tmp_path / "other-ca.crt"))
    assert json.loads(res.stdout)["ca"] == str(tmp_path / "other-ca.crt")


@pytest.mark.parametrize(("args", "needle"), [
    (["--broker", "mqtt://broker:1883", "--ca", "{ca}"], "need an mqtts:// broker URL"),
    (["--broker", "mqtts://broker:8883", "--ca", "{tmp}/missing.crt"], "--ca"),
    (["--broker", "mqtts://broker:8883", "--cert", "{ca}"], "--cert and --key go together"),
])
def test_bad_tls_settings_are_one_sentence(tmp_path, args, needle):
    (tmp_path / "ca.crt").write_text("x")
    args = [a.format(ca=tmp_path / "ca.crt", tmp=tmp_path) for a in args]
    res = run_cli("agent", "--check-config", *args)
    assert res.returncode == 2, res.stderr
    assert needle in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
