"""A TLS file that is readable but not what its flag wants (the client key given as --ca, a
certificate as --key, the key of another certificate) is one sentence naming the file, before
anything connects: OpenSSL's own said "cannot load TLS files for mqtts://…: [X509:
NO_CERTIFICATE_OR_CRL_FOUND] no certificate or crl found (_ssl.c:4154)", naming none."""

import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.security.deploy import DEPLOY, needs_tools

pytestmark = needs_tools


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("pki")
    subprocess.run(["bash", str(DEPLOY / "mkcerts.sh"), str(work), "127.0.0.1", "client1"],
                   check=True, capture_output=True)
    subprocess.run(["openssl", "genrsa", "-out", str(work / "other.key"), "2048"], check=True,
                   capture_output=True)
    subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out",
                    str(work / "ec.key")], check=True, capture_output=True)
    (work / "notes.txt").write_text("not a certificate\n")
    return work


@pytest.mark.parametrize(("files", "said"), [
    (["--ca", "notes.txt"], "--ca {d}/notes.txt holds no PEM certificate: give the certificate "
     "of the CA that signed the broker's"),
    (["--ca", "client1.key"], "--ca {d}/client1.key holds no PEM certificate"),
    (["--ca", "ca.crt", "--cert", "client1.key", "--key", "client1.crt"],
     "--cert {d}/client1.key holds no PEM certificate."),
    (["--ca", "ca.crt", "--cert", "client1.crt", "--key", "notes.txt"],
     "--key {d}/notes.txt holds no PEM private key."),
    (["--ca", "ca.crt", "--cert", "client1.crt", "--key", "other.key"],
     "--key {d}/other.key is not the key of --cert {d}/client1.crt"),
    # A key of another type (OpenSSL's NO_CERTIFICATE_ASSIGNED): it read "holds no PEM
    # private key" of one.
    (["--ca", "ca.crt", "--cert", "client1.crt", "--key", "ec.key"],
     "--key {d}/ec.key is not the key of --cert {d}/client1.crt"),
])
@pytest.mark.parametrize("command", [["status", "--wait", "1"], ["agent", "--check-config"]])
def test_a_tls_file_of_the_wrong_kind_is_one_sentence_naming_it(pki, files, said, command):
    args = [str(pki / a) if not a.startswith("--") else a for a in files]
    res = run_cli(*command, "--broker", "mqtts://127.0.0.1:9", *args)
    assert res.returncode == 2, res.stderr
    assert said.format(d=pki) in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    assert "_ssl.c" not in res.stderr


def test_the_right_files_pass_to_the_connect(pki):
    res = run_cli("status", "--wait", "1", "--broker", "mqtts://127.0.0.1:9", "--ca",
                  str(pki / "ca.crt"), "--cert", str(pki / "client1.crt"), "--key",
                  str(pki / "client1.key"))
    assert res.returncode == 2 and "cannot reach the MQTT broker" in res.stderr, res.stderr
