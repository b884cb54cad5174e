"""Fixtures for the real-hardware readers: reference data (tests/real/data, see its README) and a
small extractor for the ``ttar`` text archives that node_exporter and procfs ship sysfs trees in.
"""

import os
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent / "data"
_SEPARATOR = "# ttar - "


def extract_ttar(archive: Path, dest: Path) -> list[Path]:
    """Extract a ttar archive under ``dest``; returns the regular files written.

    Format (documented in the README next to the archives): blocks separated by ``# ttar - - -``
    lines; ``Directory: <path>`` + ``Mode:``; or ``Path: <path>``, ``Lines: <n>``, n content lines,
    ``Mode:``; a content line ending in ``EOF`` means "no trailing newline"; ``SymlinkTo: <target>``
    replaces ``Lines:`` for a symlink.
    """
    lines = archive.read_text().split("\n")
    files: list[Path] = []
    i = 0

    def target(rel: str) -> Path:
        p = (dest / rel).resolve()
        if dest.resolve() not in p.parents and p != dest.resolve():
            raise ValueError(f"ttar path escapes the destination: {rel}")
        return p

    while i < len(lines):
        line = lines[i]
        i += 1
        if not line or line.startswith(_SEPARATOR):
            continue
        if line.startswith("Directory: "):
            path = target(line.removeprefix("Directory: "))
            path.mkdir(parents=True, exist_ok=True)
            if i < len(lines) and lines[i].startswith("Mode: "):
                path.chmod(int(lines[i].removeprefix("Mode: "), 8))
                i += 1
            continue
        if line.startswith("Path: "):
            path = target(line.removeprefix("Path: "))
            path.parent.mkdir(parents=True, exist_ok=True)
            head = lines[i]
            i += 1
            if head.startswith("SymlinkTo: "):
                os.symlink(head.removeprefix("SymlinkTo: "), path)
                continue
            if not head.startswith("Lines: "):
                raise ValueError(f"{archive}:{i}: expected Lines:, got {head!r}")
            n = int(head.removeprefix("Lines: "))
            body = lines[i:i + n]
            i += n
            text = "".join(f"{ln}\n" for ln in body)
            if body and body[-1].endswith("EOF"):
                text = text[: -len("EOF\n")]
            path.write_text(text)
            files.append(path)
            if i < len(lines) and lines[i].startswith("Mode: "):
                path.chmod(int(lines[i].removeprefix("Mode: "), 8))
                i += 1
            continue
        raise ValueError(f"{archive}:{i}: unexpected line {line!r}")
    return files


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture
def node_exporter_sys(tmp_path: Path) -> Path:
    """node_exporter's sysfs fixture: returns the extracted ``sys`` directory."""
    extract_ttar(DATA / "node_exporter_sys_class_infiniband.ttar", tmp_path / "ne")
    return tmp_path / "ne" / "sys"


@pytest.fixture
def procfs_sys(tmp_path: Path) -> Path:
    """procfs's sysfs fixture (hfi1_0, mlx4_0, mlx5_0 with hw_counters): the ``sys`` directory."""
    extract_ttar(DATA / "procfs_sys_class_infiniband.ttar", tmp_path / "procfs")
    return tmp_path / "procfs" / "fixtures" / "sys"
