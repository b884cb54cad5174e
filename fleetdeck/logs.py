"""Plain, journald-friendly log lines: level, logger, message. No colour, no timestamps on a
non-TTY (journald adds its own). A full-screen console sends them elsewhere while it owns the
terminal (``divert_from_terminal``)."""

import logging
import sys
from collections.abc import Callable
from logging.handlers import RotatingFileHandler
from pathlib import Path


def setup_logging(level: str = "warning", one_shot: bool = False,
                  says_its_link: bool = False) -> None:
    """``one_shot``: a command that ends in one sentence (status, drain …), where the MQTT
    libraries' own lines only repeat it; a daemon (agent, collect, sim) keeps their errors.
    ``says_its_link``: a command whose own output says what became of its broker connection
    (status's incident and exit, a command's outcome), so the transport's reconnect warnings
    only came before it (three "WARNING fleetdeck.transport: …" lines before status's summary: a
    newcomer's run); they show at --log-level info."""
    handler = logging.StreamHandler(sys.stderr)
    fmt = "%(levelname)s %(name)s: %(message)s"
    if sys.stderr.isatty():
        fmt = "%(asctime)s " + fmt
    handler.setFormatter(logging.Formatter(fmt))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # paho/aiomqtt and amqtt are chatty at INFO about every reconnect attempt.
    for noisy in ("amqtt", "transitions"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
    # gmqtt and paho ("mqtt") log what fleetdeck says in one sentence itself (a refused
    # password, a listener that is not an MQTT broker, a lost connection) as ERROR lines and
    # tracebacks before that sentence (a newcomer's scripts): a one-shot command shows them
    # only at --log-level debug.
    if says_its_link and root.level > logging.INFO:
        # On this command's stderr only: a logger level would outlive the command in a
        # process that runs more than one (the tests), and silence the TUI's notices.
        handler.addFilter(_below_error_from("fleetdeck.transport"))
    quiet = logging.CRITICAL if one_shot else logging.ERROR
    for library in ("gmqtt", "mqtt"):
        logging.getLogger(library).setLevel(
            logging.DEBUG if root.level <= logging.DEBUG else max(quiet, root.level))


def _below_error_from(name: str) -> Callable[[logging.LogRecord], bool]:
    """A handler filter that drops ``name``'s records below ERROR."""
    prefix = name + "."

    def keep(record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR or not (
            record.name == name or record.name.startswith(prefix))

    return keep


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LOG_FILE_BYTES = 1 << 20
"""A console left disconnected for days logs a line per reconnect attempt: the file is rotated
at this size (one old file kept) rather than left to grow."""


def file_handler(path: Path) -> logging.Handler | None:
    """A rotating log file at ``path``, or None when it cannot be opened (a read-only state
    directory must not stop the console; its records then go only where else they are sent)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Opened now, not on the first record: a failure at emit time is printed to stderr by
        # logging itself, which is what this handler is there to avoid.
        handler: logging.Handler = RotatingFileHandler(path, maxBytes=LOG_FILE_BYTES, backupCount=1,
                                      encoding="utf-8")
    except OSError:
        return None
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    return handler


def divert_from_terminal(*handlers: logging.Handler) -> Callable[[], None]:
    """While a full-screen front end owns the terminal, a record written to stderr lands on top
    of its screen: the root logger's plain stream handlers (``setup_logging``'s) make way for
    ``handlers`` until the function returned is called, which puts them back. Handlers of other
    kinds (files, a test runner's capture) are left as they are."""
    root = logging.getLogger()
    removed: list[logging.Handler] = [h for h in root.handlers
                                      if type(h) is logging.StreamHandler]
    for h in removed:
        root.removeHandler(h)
    for h in handlers:
        root.addHandler(h)

    def restore() -> None:
        for h in handlers:
            root.removeHandler(h)
            h.close()
        for h in removed:
            root.addHandler(h)

    return restore
