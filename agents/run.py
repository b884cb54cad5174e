"""``fleetdeck agent``: one node agent as a long-running process (systemd) or ``--once``."""

import asyncio
import contextlib
import json
import logging
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fleetdeck.agents.agent import NodeAgent
from fleetdeck.agents.config import AgentSettings
from fleetdeck.agents.notify import Notifier
from fleetdeck.agents.outbox import Outbox
from fleetdeck.agents.source import Source
from fleetdeck.agents.state import (
    StateStore,
    hold_node_lock,
    keep_node_locks,
    release_node_lock,
    state_file,
    usable_state_dir,
)
from fleetdeck.brokerurl import BrokerURL, parse_broker_url, tls_context, with_tls
from fleetdeck.errors import UserError
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import Topology
from fleetdeck.protocol.signing import load_key

log = logging.getLogger("fleetdeck.agent")


GPU_DEADLINE_SHARE = 0.75
"""Of the interval, how long a sample waits for a real GPU reader: the rest is the other
readers' and the publish's, so a hung reader leaves the samples on time (at the whole
interval, each came late and the falling-behind sample skip dropped one in three). Not how
long before it counts as hung: that is ``GPU_HUNG_S`` (agents/real/source.py), whatever the
interval."""


def make_source(cfg: AgentSettings, *, deadline: bool = True) -> Source:
    """``deadline``: a real GPU reader is waited for at most ``GPU_DEADLINE_SHARE`` of the
    interval at each sample (a long-running agent); without it, as long as it takes
    (``--once``)."""
    topology = Topology(rack=cfg.rack, leaf=cfg.leaf, spine_group=cfg.spine_group)
    if cfg.source == "sim":
        from fleetdeck.agents.sim.node import SimNode

        return SimNode(cfg.node_id, seed=cfg.seed, topology=topology)
    from fleetdeck.agents.real.source import make_real_source

    try:
        return make_real_source(cfg.source, cfg.sysfs_root, kernel_log=cfg.kernel_log,
                                gpus_expected=cfg.expect_gpus,
                                ib_ports_expected=cfg.expect_ib_ports, topology=topology,
                                expected_rate_gbps=cfg.expect_ib_rate or None,
                                gpu_deadline_s=GPU_DEADLINE_SHARE * cfg.interval_s
                                if deadline else None)
    except ValueError as err:
        raise UserError(f"--source {cfg.source}: {err} (or use 'sim').") from None


def close_source(source: Source) -> bool:
    """Close ``source``'s readers; False when one did not close in time (a wedged GPU driver
    blocks ``nvmlShutdown``: ``RealSource.close``)."""
    close = getattr(source, "close", None)
    return close() is not False if callable(close) else True


def sample_once(cfg: AgentSettings) -> dict[str, Any]:
    """Birth and one telemetry sample as they would go on the wire."""
    source = make_source(cfg, deadline=False)
    try:
        agent = NodeAgent(cluster=cfg.cluster, node_id=cfg.node_id, source=source,
                          url=BrokerURL("127.0.0.1", 1), interval_s=cfg.interval_s)
        agent.bd_seq = agent._next_bd_seq()
        birth = json.loads(codec.encode(agent.birth()))
        telemetry = json.loads(codec.encode(agent.telemetry()))
        return {"birth": birth, "telemetry": telemetry}
    finally:
        close_source(source)


def make_outbox(state_dir: Path | None, node_id: str) -> Outbox | None:
    """At start-up, before the event loop runs: on-disk outbox, or None for memory only."""
    if not state_dir:
        return None
    path = Path(state_dir)
    try:
        path.mkdir(parents=True, exist_ok=True)
        return Outbox(path / f"outbox-{node_id}.jsonl")
    except OSError as err:
        raise UserError(f"--state-dir {path}: {err.strerror}.") from None


NO_STATE_DIR_WARNING = (
    "no --state-dir: the drain state and the ids of executed commands live in memory only, so "
    "after an agent restart this node reports itself in service even if it was drained, and a "
    "captured signed command could run again (the systemd unit always sets one; see "
    "docs/real-nodes.md)")


def make_state(state_dir: Path | None, node_id: str) -> StateStore:
    """At start-up: the node's state file in ``state_dir`` (made if missing), or memory only."""
    if not state_dir:
        log.warning("%s: %s", node_id, NO_STATE_DIR_WARNING)
        return StateStore()
    return StateStore(state_file(usable_state_dir(Path(state_dir)), node_id), node_id)



def broker_url(cfg: AgentSettings) -> BrokerURL:
    url = with_tls(parse_broker_url(cfg.broker), cfg.ca, cfg.cert, cfg.key)
    if url.tls:
        tls_context(url)  # unreadable CA or key: one sentence now, not a retry loop later
    if url.username and url.username != cfg.node_id:
        # The shipped ACL lets user X publish only under node X (deploy/mosquitto/acl).
        log.warning("broker user '%s' is not the node id '%s': a broker with the shipped ACL "
                    "will drop everything this agent publishes", url.username, cfg.node_id)
    return url


class ReaderLeftOpen(Exception):
    """``run_agent`` ended by ``error`` and a reader did not close in time: the caller says
    ``error`` as it would have (a ``SystemExit`` as its code, not a traceback), then exits
    without the usual clean-up all the same."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


ONLY_AT_START = "agent.env and flags are read only at a restart"
"""Said of every reread: what a SIGHUP cannot see (``reread_said``)."""


def reread_said(cfg: AgentSettings, reread: Callable[[], AgentSettings]) -> str:
    """What a SIGHUP finds: the configuration read again (``reread``: the start's file, its
    environment and flags) against the settings the agent runs on, in one sentence.

    An agent applies its settings only at start; the sentence says so, and whether the next
    start would refuse the file. SIGHUP used to end the agent at once (Python's default), and
    systemd's ``Restart=on-failure`` takes a SIGHUP death for a clean stop: an operator's
    ``kill -HUP`` after editing agent.toml, as for most daemons, took the node offline for good
    with not a word in its journal (docs/real-nodes.md, "Changing the settings")."""
    try:
        now = reread()
    except UserError as err:
        return (f"configuration read again (SIGHUP): {str(err).rstrip('.')}. This agent runs "
                "on with the settings it started with, and its next start would refuse this "
                "one: fix it first ('fleetdeck agent --check-config' checks)")
    old, new = _shown(cfg), _shown(now)
    changed = [f"{key} {old.get(key)!r} -> {new.get(key)!r}"
               for key in sorted(set(old) | set(new)) if old.get(key) != new.get(key)]
    # Only the file is read again: the environment (systemd's agent.env) and the flags are
    # the process's own, fixed at its start. "No setting changed" after an edit of agent.env
    # read as the edit taken, or needless (a review).
    if not changed:
        return ("configuration read again (SIGHUP): valid, and no setting changed; "
                f"{ONLY_AT_START}")
    return (f"configuration read again (SIGHUP): valid; changed: {', '.join(changed)}. This "
            "agent applies settings only at start and runs on with the ones it started with: "
            f"restart it to apply them (systemctl restart fleetdeck-agent); {ONLY_AT_START}")


def _shown(cfg: AgentSettings) -> dict[str, Any]:
    """The settings as ``--check-config`` prints them: the broker URL without its password."""
    shown: dict[str, Any] = cfg.model_dump(mode="json")
    try:
        shown["broker"] = str(parse_broker_url(cfg.broker))
    except UserError:
        shown["broker"] = "(unreadable)"
    return shown


async def run_agent(cfg: AgentSettings, agent_kwargs: dict[str, Any] | None = None, *,
                    reread: Callable[[], AgentSettings] | None = None) -> bool:
    """``agent_kwargs``: extra NodeAgent keywords from the command line (``--wire``).
    ``reread``: the configuration read again as at start, for SIGHUP (``reread_said``). False
    when a reader did not close in time: the caller exits without the usual clean-up, which
    may wait on the same wedged driver (``fleetdeck.runtime.force_exit``); ``ReaderLeftOpen``
    when the agent ended by an exception, too."""
    url = broker_url(cfg)
    lock = hold_node_lock(Path(cfg.state_dir), cfg.node_id) if cfg.state_dir else None
    try:
        return await _run_agent(cfg, url, agent_kwargs, reread)
    finally:
        if lock is not None:
            release_node_lock(lock)


async def _run_agent(cfg: AgentSettings, url: BrokerURL,
                     agent_kwargs: dict[str, Any] | None,
                     reread: Callable[[], AgentSettings] | None) -> bool:
    node_id = cfg.node_id
    source = make_source(cfg)
    outbox = make_outbox(cfg.state_dir, node_id)
    state = make_state(cfg.state_dir, node_id)
    key = load_key(cfg.command_key_file) if cfg.command_key_file else None
    agent = NodeAgent(cluster=cfg.cluster, node_id=node_id, source=source,
                      url=url, interval_s=cfg.interval_s, keepalive=cfg.keepalive, phase_s=0.0,
                      outbox=outbox, command_key=key, state=state,
                      **{"wire": cfg.wire, **(agent_kwargs or {})})
    notifier = Notifier()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        notifier.stopping()
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)

    def on_hangup() -> None:
        said = reread_said(cfg, reread) if reread is not None else (
            "SIGHUP: this agent applies settings only at start and runs on with the ones it "
            "started with: restart it to apply a change")
        print(f"fleetdeck agent {node_id}: {said}", file=sys.stderr, flush=True)

    # A SIGHUP (a reload, ``systemctl reload``) is no stop: see ``reread_said``.
    loop.add_signal_handler(signal.SIGHUP, on_hangup)

    async def announce() -> None:
        # Ready once running, broker or not: a long-running agent waits for its broker
        # (README), and a unit of Type=notify waiting for a broker never reached timed out and
        # restarted in a loop (a newcomer's run on a wrong URL). STATUS says how it goes.
        notifier.ready(f"publishing to {url} every {cfg.interval_s:g} s once connected")
        while not stop.is_set():
            state = "connected" if agent.connected.is_set() else "reconnecting"
            notifier.status(f"{state} to {url}; seq {agent.seq}; sessions {agent.connects}")
            for _ in range(2):
                keep_node_locks()  # a state directory removed: made again, locked again
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 5)
                if stop.is_set():
                    break

    async def say_connected() -> None:
        # Once, on stderr (the unit's journal): a healthy agent logged nothing at all, so the
        # "journalctl -u fleetdeck-agent -f" that ends docs/real-nodes.md's install showed only
        # systemd's "Started" (a newcomer's production set-up). A reconnect says itself
        # ("connected to the MQTT broker at … again").
        _, pending = await asyncio.wait(
            [asyncio.ensure_future(agent.connected.wait()), asyncio.ensure_future(stop.wait())],
            return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        if agent.connected.is_set():
            print(f"fleetdeck agent {node_id}: connected to {url} (cluster {cfg.cluster}), "
                  f"publishing every {cfg.interval_s:g} s", file=sys.stderr, flush=True)

    log.info("agent %s (%s) publishing to %s every %.1f s", node_id, source.name, url,
             cfg.interval_s)
    helpers = [asyncio.create_task(announce()), asyncio.create_task(say_connected()),
               asyncio.create_task(notifier.watchdog(lambda: agent.last_progress, stop,
                                                     cfg.interval_s))]
    error: BaseException | None = None
    try:
        await agent.run(stop)
    except BaseException as exc:  # raised below, once the readers are closed
        error = exc
    stop.set()
    await asyncio.gather(*helpers, return_exceptions=True)
    closed = close_source(source)  # bounded (``RealSource.close``); nothing else runs now
    if error is not None:
        if not closed:
            # Its False went with the exception, and the exit it raises to waited on the
            # wedged driver after all (a review).
            raise ReaderLeftOpen(error) from error
        raise error
    return closed
