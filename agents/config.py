"""Agent configuration: a TOML file, ``FLEETDECK_*`` environment variables and CLI flags.

Precedence, highest first: command-line flag, environment variable, TOML file, default. Every
problem is reported as one sentence naming where the bad value came from (file and line, the
variable, or the flag), and the agent does not start (``--check-config`` only checks).
"""

import difflib
import logging
import os
import re
import socket
import tomllib
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from fleetdeck.brokerurl import parse_broker_url, with_tls
from fleetdeck.errors import UserError
from fleetdeck.paths import not_a_file, open_to_others
from fleetdeck.protocol.ids import InvalidId, validate_id

log = logging.getLogger("fleetdeck.agent")

DEFAULT_CONFIG = Path("/etc/fleetdeck/agent.toml")
ENV_PREFIX = "FLEETDECK_"

FLAGS = {
    "broker": "--broker", "cluster": "--cluster", "node_id": "--node-id", "source": "--source",
    "interval_s": "--interval", "keepalive": "--keepalive", "sysfs_root": "--sysfs-root",
    "kernel_log": "--kernel-log", "state_dir": "--state-dir", "seed": "--seed",
    "command_key_file": "--command-key", "ca": "--ca", "cert": "--cert", "key": "--key",
    "wire": "--wire", "expect_gpus": "--expect-gpus", "expect_ib_ports": "--expect-ib-ports",
    "expect_ib_rate": "--expect-ib-rate", "rack": "--rack", "leaf": "--leaf",
    "spine_group": "--spine-group",
}


class AgentSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid")

    broker: str = "mqtt://127.0.0.1:1883"
    cluster: str = "demo"
    node_id: str = Field(default_factory=lambda: socket.gethostname().split(".")[0])
    source: str = "sim"
    interval_s: float = Field(default=1.0, gt=0, le=3600, allow_inf_nan=False)
    keepalive: int = Field(default=10, ge=1, le=3600)
    sysfs_root: Path = Path("/sys")
    kernel_log: str | None = None
    state_dir: Path | None = None
    seed: int = 0
    command_key_file: Path | None = None
    """When set, only commands signed with this key are obeyed (protocol/signing.py)."""
    ca: str | None = None
    """CA bundle that signed the broker's certificate (mqtts://); default: the system's.
    Named like the console's --ca and $FLEETDECK_CA, so one site setup serves both."""
    cert: str | None = None
    key: str | None = None
    """Client certificate and its key, for mutual TLS."""
    expect_gpus: int = Field(default=0, ge=0, le=64)
    """The GPUs this node should have (8 on ND H100 v5); 0: as many as found at start. Told,
    a node that booted short of one reads failed (G1) instead of ok."""
    expect_ib_ports: int = Field(default=0, ge=0, le=64)
    """The InfiniBand ports it should have (8 on ND H100 v5); 0: as many as found."""
    expect_ib_rate: float | None = Field(default=None, ge=0, le=10_000, allow_inf_nan=False)
    """The link rate (Gb/s) its ports should run at, stated in its birth (N1 judges by it: 200
    on an HDR cluster); None (or 0): not stated, and the console judges by NDR's 400. It was
    0.0 in --check-config's output where --help said "default 400" (a newcomer's set-up)."""
    rack: str = Field(default="", max_length=64)
    leaf: str = Field(default="", max_length=64)
    """The leaf switch group its HCAs are cabled to (``leaf03``: rail K is ``leaf03-rK``). The
    console names a suspect switch only among nodes that say theirs: without it, every real
    node sat in one "(no leaf)" group and three unrelated bad ports on a rail made a suspect
    switch of nothing (a real-node drill; docs/real-nodes.md)."""
    spine_group: str = Field(default="", max_length=64)
    wire: int = Field(default=2, ge=1, le=2)
    """Telemetry wire format: 2 (columns, keyframes and deltas) needs consoles that read it;
    1 for older consoles (docs/protocol.md, "Rollout")."""

    @model_validator(mode="after")
    def _tls(self) -> "AgentSettings":
        try:
            with_tls(parse_broker_url(self.broker), self.ca, self.cert, self.key)
        except UserError as err:
            raise ValueError(str(err).rstrip(".")) from None
        return self

    @model_validator(mode="after")
    def _sysfs(self) -> "AgentSettings":
        # A mistyped root read as "class/infiniband: missing (no InfiniBand driver loaded?)",
        # sending the reader after a driver when the path was wrong.
        if "sysfs" in self.source and not self.sysfs_root.is_dir():
            raise ValueError(f"sysfs root {self.sysfs_root} (--sysfs-root, sysfs_root) is not a "
                             "directory: give the sysfs mount, such as /sys, or a "
                             "class/infiniband directory")
        root = self.sysfs_root
        if ("sysfs" in self.source and root.name != "infiniband"
                and not (root / "class").is_dir() and (root / "sys" / "class").is_dir()):
            # One level too high (an unpacked capture's root): "class/infiniband: missing (no
            # InfiniBand driver loaded?)" sent the reader after a driver (a newcomer's run).
            raise ValueError(f"sysfs root {root} (--sysfs-root, sysfs_root) has no class/ but "
                             f"{root / 'sys'} has: give that, the sysfs mount itself")
        if ("sysfs" in self.source and root.name != "infiniband"
                and not (root / "class").is_dir() and (root / "infiniband").is_dir()):
            # One level too low (/sys/class): read as "/sys/class/class/infiniband: missing (no
            # InfiniBand driver loaded?)", exit 0 (a real-node audit; docs/real-nodes.md).
            raise ValueError(f"sysfs root {root} (--sysfs-root, sysfs_root) has no class/ but "
                             f"holds infiniband/: give {root / 'infiniband'}, or the sysfs "
                             "mount itself")
        return self

    @field_validator("kernel_log")
    @classmethod
    def _kernel_log(cls, v: str | None) -> str | None:
        # A file not there yet may come (a rotation, a syslog started later) and one this user
        # may not read is said in agent.errors (A1, docs/real-nodes.md); a folder never holds
        # a log line: "kernel log: IsADirectoryError: [Errno 21] Is a directory" each poll.
        if v is not None and v != "journal" and Path(v).is_dir():
            raise ValueError(f"{v} is a directory: give the log file the kernel's messages go "
                             "to (/var/log/kern.log, /var/log/syslog) or 'journal'")
        return v

    @field_validator("broker")
    @classmethod
    def _broker(cls, v: str) -> str:
        try:
            parse_broker_url(v)
        except UserError as err:
            raise ValueError(str(err).rstrip(".")) from None
        return v

    @field_validator("cluster", "node_id")
    @classmethod
    def _ids(cls, v: str, info: ValidationInfo) -> str:
        try:
            return validate_id(v, (info.field_name or "id").replace("_", " "))
        except InvalidId as err:
            raise ValueError(str(err)) from None

    @field_validator("source")
    @classmethod
    def _source(cls, v: str) -> str:
        if v == "sim":
            return v
        from fleetdeck.agents.real.source import parse_kind

        parse_kind(v)  # raises ValueError with the reason
        return v

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # toml_file comes from the model_config of the per-file subclass (load_settings).
        return init_settings, env_settings, TomlConfigSettingsSource(settings_cls)


def _warn_if_password_open(path: Path) -> None:
    """A TOML file whose broker URL holds this node's password, readable by every local user:
    each of them can then publish as this node (docs/real-nodes.md installs agent.env 0640)."""
    mode = open_to_others(path)
    if mode is None:
        return
    broker = tomllib.loads(path.read_text()).get("broker")
    if not isinstance(broker, str):
        return
    try:
        has_password = parse_broker_url(broker).password is not None
    except UserError:
        return  # the settings' own check says what is wrong with it
    if has_password:
        log.warning("%s holds the broker password and is readable by every user of this "
                    "machine (mode %s): chmod 0640 it and chgrp it to the agent's group",
                    path, mode)


def load_settings(config: str | None, cli: dict[str, Any]) -> AgentSettings:
    """Merge file, environment and flags; raise UserError listing each problem in a sentence."""
    path: Path | None = None
    if config is not None:
        path = Path(config)
        if path.is_dir():
            raise UserError(f"config file {path} is a directory, not a TOML file.")
        why = not_a_file(path)
        if why:
            raise UserError(f"config file {path} {why}.")
    elif DEFAULT_CONFIG.is_file():
        path = DEFAULT_CONFIG
    if path is not None:
        try:
            tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as err:
            raise UserError(f"{path}: {err}.") from None
        except UnicodeDecodeError:
            # TOML is UTF-8 (a file saved as UTF-16 or a binary one ends here).
            raise UserError(f"{path} is not a UTF-8 text file, as TOML must be.") from None
        except OSError as err:
            raise UserError(f"cannot read config file {path}: {err.strerror}.") from None
    if path is not None:
        _warn_if_password_open(path)
    given = {k: v for k, v in cli.items() if v is not None}

    class FileSettings(AgentSettings):
        model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", toml_file=path)

    try:
        return FileSettings(**given)
    except ValidationError as err:
        raise UserError(" ".join(_explain(e, path, given) for e in err.errors())) from None


def _explain(e: Any, path: Path | None, given: dict[str, Any]) -> str:
    msg = str(e["msg"]).removeprefix("Value error, ")
    if not e["loc"]:
        return f"{msg}."  # a rule across settings (TLS files need mqtts://): names its flags
    field = str(e["loc"][0])
    if field in given:
        where = f"{FLAGS.get(field, field)}"
    elif f"{ENV_PREFIX}{field.upper()}" in os.environ:
        where = f"${ENV_PREFIX}{field.upper()}"
    elif path is not None:
        where = f"{path}{_line_of(path, field)}, '{field}'"
    else:
        where = field
    if e["type"] == "extra_forbidden":
        known = ", ".join(sorted(FLAGS))
        if isinstance(e.get("input"), dict) and path is not None:
            # "[agent]" over the settings, as many daemons' files have: "'agent': unknown
            # setting" named no header, and the settings under it looked right (a newcomer's
            # agent.toml).
            return (f"{where}: [{field}] is a table header; this file takes its settings at "
                    f"the top level, under no header (known: {known}).")
        return f"{where}: unknown setting{_did_you_mean(field)} (known: {known})."
    return f"{where}: {msg}."


def _did_you_mean(key: str) -> str:
    """The setting a mistyped key most likely meant: a flag's own name (``interval`` for
    ``interval_s``, ``expect-gpus``) or a near miss (``intervall``). Without it a newcomer who
    wrote ``interval = 10`` after ``--interval 10`` read a list and had to spot the ``_s``."""
    spelled = key.strip().lower().replace("-", "_").lstrip("_")
    for name, flag in FLAGS.items():
        if spelled in (name, flag.lstrip("-").replace("-", "_")):
            return f": did you mean '{name}'?"
    near = difflib.get_close_matches(spelled, list(FLAGS), n=1, cutoff=0.75)
    return f": did you mean '{near[0]}'?" if near else ""


def _line_of(path: Path, key: str) -> str:
    try:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.match(rf"\s*({re.escape(key)}\s*=|\[\s*{re.escape(key)}\s*\])", line):
                return f" line {n}"
    except OSError:
        pass
    return ""
