"""InfiniBand port error counters: the value each one stops at (docs/domain.md §2).

IBTA PortCounters are narrow and **saturate** at all-ones instead of wrapping (SymbolError and
PortRcvErrors 16 bits, LinkErrorRecovery and LinkDowned 8, LocalLinkIntegrityErrors and
ExcessiveBufferOverrunErrors 4); ``xmit_wait`` and the mlx5 ``hw_counters`` are 32 bits here.
A counter at its all-ones value counts nothing more until it is cleared (``perfquery -R``), so
a storm that goes on reads as one that stopped: rule N6 says so, and N3 holds while a counter
that saturated during a storm stays saturated (console/health.py). One table for the simulated
node's counters and the console's rules.
"""

ALL_ONES = {
    "symbol_error": 0xFFFF,
    "link_error_recovery": 0xFF,
    "link_downed": 0xFF,
    "rcv_errors": 0xFFFF,
    "rcv_remote_phys_errors": 0xFFFF,
    "xmit_discards": 0xFFFF,
    "local_link_integrity_errors": 0xF,
    "excessive_buffer_overrun_errors": 0xF,
    "xmit_wait": 0xFFFFFFFF,
    "rnr_nak_retry_err": 0xFFFFFFFF,
    "local_ack_timeout_err": 0xFFFFFFFF,
}
"""In IbPortSample's field order (the simulator builds samples positionally from it)."""

NARROW = ("symbol_error", "link_error_recovery", "link_downed", "rcv_errors",
          "local_link_integrity_errors", "excessive_buffer_overrun_errors")
"""The IBTA PortCounters the rules read, which saturate within a storm (65535 symbol errors
at 200/s is five and a half minutes)."""

FATAL = (
    "link_downed",
    "excessive_buffer_overrun_errors",
    "local_link_integrity_errors",
    "rnr_nak_retry_err",
)
"""Counters one increment of which fails a node for an hour (rule N2, NVSentinel's latch)."""

HOUR_COUNTED = (*FATAL, "symbol_error")
"""What an agent counts over the last hour for ``errors_1h`` (docs/protocol.md): the counters
of the hour-long rules N2 and N3, so a console that has watched a node for seconds (a one-shot
``status``, a restarted collector) judges the same hour a console running all along does."""
ERRORS_WINDOW_S = 3600
PCIE_WINDOW_S = 60
"""``pcie_replay_1m``: the agent's PCIe replays over the last minute (rule G11's window)."""
