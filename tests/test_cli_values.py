"""Values argparse lets through as numbers but that no command can use (NaN, infinity, beyond
the protocol's bounds), and config files that are not text: one plain sentence, exit 2, never a
hang or a traceback (found in failure drills: `status --wait nan` never returned, `sim
--interval nan` killed every agent task with a ValidationError)."""

import pytest

from tests.conftest import run_cli


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["status", "--wait", "nan"], "--wait must be a finite number"),
        (["status", "--wait", "inf"], "--wait must be a finite number"),
        (["drain", "gpu0001", "--reason", "x", "--timeout", "nan"],
         "--timeout must be a finite number"),
        (["sim", "--interval", "nan"], "--interval must be a finite number"),
        (["sim", "--interval", "99999"], "--interval must be at most 3600"),
        (["sim", "--keepalive", "99999"], "--keepalive must be at most 3600"),
        (["agent", "--interval=-inf", "--once"], "--interval must be a finite number"),
    ],
)
def test_unusable_numbers_are_one_sentence(args, needle):
    res = run_cli(*args, timeout=20)
    assert res.returncode == 2, res.stderr
    assert needle in res.stderr
    assert "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"\xff\xfeb\x00r\x00o\x00", "is not a UTF-8 text file"),
        (None, "is a directory"),
    ],
)
def test_a_config_that_is_not_a_toml_text_file_is_one_sentence(tmp_path, content, needle):
    cfg = tmp_path / "agent.toml"
    if content is None:
        cfg.mkdir()
    else:
        cfg.write_bytes(content)
    res = run_cli("agent", "--config", str(cfg), "--check-config")
    assert res.returncode == 2, res.stderr
    assert needle in res.stderr
    assert "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
