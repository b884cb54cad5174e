"""Plain, journald-friendly log lines: level, logger, message. No colour, no timestamps on a
non-TTY (journald adds its own)."""

import logging
import sys


def setup_logging(level: str = "warning") -> None:
    handler = logging.StreamHandler(sys.stderr)
    fmt = "%(levelname)s %(name)s: %(message)s"
    if sys.stderr.isatty():
        fmt = "%(asctime)s " + fmt
    handler.setFormatter(logging.Formatter(fmt))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # paho/aiomqtt and amqtt are chatty at INFO about every reconnect attempt.
    for noisy in ("amqtt", "transitions", "mqtt"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
