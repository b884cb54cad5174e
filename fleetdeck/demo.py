"""``fleetdeck demo``: a private broker, a simulated fleet and the console, cleaned up on exit.

What the demo writes (its audit log, the history store, the console's log, recordings made with
``R``) goes into a directory of its own, ``$XDG_STATE_HOME/fleetdeck/demo-<time>/``, never into
the operator's real audit log or the current directory; its path is printed on exit. While it
runs, a mark there (locked while it lives) names its broker and cluster, so commands typed in a
second terminal against that broker for that cluster write the demo's audit log too, and a second
console keeps its store here (``fleetdeck.paths.running_demo``).
"""

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from fleetdeck.agents.sim.footprint import refuse_unless_it_fits
from fleetdeck.broker import AMQTT, ManagedBroker
from fleetdeck.errors import UserError
from fleetdeck.paths import mark_demo_broker, state_base
from fleetdeck.runtime import on_forced_exit

AUDIT_FILE = "audit.jsonl"
STORE_FILE = "demo.db"
LOG_FILE = "console.log"
CONSOLE_STORES = "console-*.db"
"""A second console's store in the demo's folder: ``console-<pid>-<cluster>.db``
(fleetdeck/cli.py, cmd_console)."""


def demo_dir(now: float | None = None) -> Path:
    """A new, empty directory for one demo run: ``<state>/demo-20260125T151223`` (with a
    ``-2``, ``-3`` … suffix when two demos start in the same second)."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.localtime(time.time() if now is None else now))
    base = state_base()
    try:
        base.mkdir(parents=True, exist_ok=True)
        for n in range(1, 1000):
            path = base / (f"demo-{stamp}" if n == 1 else f"demo-{stamp}-{n}")
            try:
                path.mkdir()
            except FileExistsError:
                continue
            return path
    except OSError as err:
        # XDG_STATE_HOME under a file, a file in its place, or read-only: a traceback before
        # (a newcomer's run).
        raise UserError(f"cannot make the demo's folder under {base}: "
                        f"{(err.strerror or str(err)).lower()} (set XDG_STATE_HOME to a "
                        "writable folder).") from None
    raise RuntimeError(f"cannot make a demo directory under {base}")


def fleetdeck_command() -> str:
    """How to run fleetdeck from the shell the demo ran in: ``make demo`` puts it in its own
    virtualenv, not on PATH, so the commands it printed ("fleetdeck events …") were "command
    not found" when pasted (a newcomer's run)."""
    mine = Path(sys.executable).parent / "fleetdeck"
    on_path = shutil.which("fleetdeck")
    if not mine.exists() or (on_path and Path(on_path).resolve() == mine.resolve()):
        return "fleetdeck"
    with contextlib.suppress(ValueError):
        return str(mine.relative_to(Path.cwd()))
    return str(mine)


def audit_size(path: Path) -> int:
    """How long the operator's real audit log is now (0 if there is none yet)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def commands_since(path: Path, offset: int, cluster: str) -> int:
    """Commands (distinct request ids) for ``cluster`` appended to the audit log at ``path``
    after ``offset``: what a second terminal sent to the demo's fleet without ``--audit-log``,
    so into the operator's real audit log (README)."""
    try:
        with path.open("rb") as fh:
            fh.seek(offset)
            tail = fh.read()
    except OSError:
        return 0
    ids: set[str] = set()
    for raw in tail.splitlines():
        try:
            record = json.loads(raw)
        except ValueError:
            continue  # a torn or foreign line: not ours to judge
        if isinstance(record, dict) and record.get("cluster") == cluster:
            ids.add(str(record.get("request_id", "")))
    return len(ids)


def where_it_went(path: Path, elsewhere: tuple[Path, int] | None = None,
                  cluster: str = "demo") -> str:
    """The lines printed when the demo ends: where its audit log, store and recordings are.
    ``elsewhere``: the real audit log and how many commands for the demo's cluster other
    terminals wrote there during the run; the demo's own log said "no commands were sent"
    after two drains from a second terminal, which went there (a newcomer's run)."""
    audit = path / AUDIT_FILE
    recordings = sorted(path.glob("*.jsonl.gz"))
    cmd = fleetdeck_command()
    # Empty, not only missing: a second console checks it can write the log before it opens
    # (cli.py), which makes the file with no command in it.
    lines = [f"fleetdeck demo: this run's files are in {path}",
             f"  audit log   {audit}"
             + ("" if audit_size(audit) else " (no commands were sent from this console)")]
    if elsewhere is not None and elsewhere[1]:
        real, count = elsewhere
        # Commands against this demo's broker come here by its mark (``running_demo``): what
        # is left for its cluster in the real log was sent to another address of it, or to a
        # real fleet of the same name (the default 'demo'): not called this demo's for sure.
        lines.append(f"  elsewhere   {count} command{'s' if count != 1 else ''} for cluster "
                     f"'{cluster}' went to your real audit log {real} while the demo ran (if "
                     f"they were for this demo, --audit-log {audit} keeps them here)")
    lines += [f"  store       {path / STORE_FILE}  ({cmd} events --db {path / STORE_FILE})"]
    # A second console against this demo kept its own store here (cli.py, cmd_console): named,
    # or its history was in the folder with nothing to say so.
    lines.extend(f"  store       {db}  (a second console's; {cmd} events --db {db})"
                 for db in sorted(path.glob(CONSOLE_STORES)))
    if recordings:
        lines.extend(f"  recording   {r}  ({cmd} replay {r})" for r in recordings)
    else:
        lines.append("  recordings  none (R in the console records)")
    return "\n".join(lines)


def run_demo(args: argparse.Namespace) -> int:
    # Checked here: the simulator's own refusal would land in its log behind an empty console.
    refuse_unless_it_fits(args.nodes, spread=False)
    broker = ManagedBroker(args.broker_kind, port=args.port)
    with broker:
        # amqtt hangs clients that connect concurrently (MQTT.md §2): serialise and space them.
        concurrency = "1" if broker.kind == AMQTT else "32"
        sim_cmd = [
            sys.executable, "-m", "fleetdeck.cli", "sim", "--broker", str(broker.url),
            "--cluster", args.cluster, "--nodes", str(args.nodes), "--interval",
            str(args.interval), "--seed", str(args.seed), "--connect-concurrency", concurrency,
            "--scenario", "demo",
        ]
        log = open(os.path.join(str(broker.workdir), "sim.log"), "ab")  # noqa: SIM115
        sim = subprocess.Popen(sim_cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                               start_new_session=True)

        def last_words() -> None:
            # Sessions of their own: a terminal that closes does not reach them.
            sim.kill()
            broker.kill()
            broker.close()  # its temporary directory

        forget = on_forced_exit(last_words)
        try:
            if args.headless:
                from fleetdeck.console.cli.status import run_status

                time.sleep(args.headless)
                return run_status(broker.url, args.cluster, 2.0, as_json=False)
            from fleetdeck.console.audit import default_audit_path, os_user
            from fleetdeck.console.tui.app import run_console

            state = demo_dir()
            real_audit = default_audit_path()
            real_audit_start = audit_size(real_audit)
            # A drain typed in a second terminal against this broker finds the mark and is
            # audited here, not in the operator's real log (README, "Two commands").
            mark = None
            with contextlib.suppress(OSError):
                mark = mark_demo_broker(state, broker.url.host, broker.url.port, args.cluster)
            # Ended by force_exit no 'finally' runs: the mark, unlocked, was left in the folder.
            forget_mark = on_forced_exit(mark.close) if mark is not None else lambda: None
            try:
                # The private broker's port is picked free at start: the header shows it, so
                # a second terminal can point the CLI at this fleet.
                label = f"{broker.label} {broker.url.address}"
                return run_console(broker.url, args.cluster, broker_label=label,
                                   audit_path=state / AUDIT_FILE, store_path=state / STORE_FILE,
                                   # The CLI's --operator default: a drain from a second
                                   # terminal is audited under the same name.
                                   record_dir=state, operator=os_user(),
                                   log_path=state / LOG_FILE)
            finally:
                forget_mark()
                if mark is not None:
                    mark.close()
                print(where_it_went(state, (real_audit, commands_since(
                    real_audit, real_audit_start, args.cluster)), args.cluster))
        finally:
            forget()
            sim.terminate()
            try:
                sim.wait(timeout=10)
            except subprocess.TimeoutExpired:
                sim.kill()
            log.close()
