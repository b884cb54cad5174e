"""XID classes, one definition for the agents' event severities and the console's rules.

docs/domain.md §4 has the codes with their meanings and sources. ``DRAIN`` is the console's G2
(and the simulated scheduler's node health check); ``WARN`` its G3: NVIDIA's warn-class codes
(63 row remap pending, 92 high SBE rate, 94 contained ECC error) and the rest of aznhc's fail
list (68/69 engine exceptions, 109 a context-switch timeout NVIDIA resets the GPU for; 56-58, 65,
73, 80, 81 unused on H100). Every other code (13, 31, 43, 45: the crashing application and the
driver's clean-up after any error) is routine: an INFO event, judged by nothing.
"""

DRAIN = frozenset({48, 62, 64, 74, 79, 95, 119, 120, 136, 140})
WARN = frozenset({63, 92, 94, 56, 57, 58, 65, 68, 69, 73, 80, 81, 109})

RECOVERY = 154
"""XID 154: the driver states a GPU recovery action (R555+, H100 and later); follow it."""
RECOVERY_ACTIONS = {0: "none", 1: "GPU reset required", 2: "node reboot required",
                    3: "drain P2P", 4: "drain and reset", 5: "recover the IMEX domain",
                    6: "PCIe bus reset required", 7: "system reboot required"}
"""NVIDIA's GPU recovery action flag (``NVML_GPU_RECOVERY_ACTION_*``, as XID 154 states it:
"GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"); 5-7 came with
later drivers (docs/domain.md §4)."""
RECOVERY_DRAIN = frozenset({1, 2, 4, 5, 6, 7})
"""Actions that take the GPU out of service until done: a GPU, bus or node reset or reboot,
or a drain before a reset. Not 1 as a warning: NVIDIA's "GPU reset" says the GPU cannot be
used until it is reset ("terminate all GPU processes, reset the GPU"), so a job on it is lost
and the node takes no work until then (a fault audit: it read degraded, and the simulated
scheduler kept placing work on it)."""
RECOVERY_WARN = frozenset({3})
"""Actions on the GPU while it keeps working: NVIDIA's Drain P2P, stop the processes that do
peer-to-peer traffic and disable UVM persistence mode; the driver then states the next action
(docs/domain.md §4)."""
ACTION_UNREAD = 255
"""The action of an XID 154 whose log line was cut before it (a torn read, a truncated log):
no known action, so G3 as one this version does not know, and said as cut. A bare 154 was
judged by nothing, while the line may have asked for a node reboot (docs/domain.md §4)."""


def recovery_warns(action: int | None) -> bool:
    """G3's XID 154: drain P2P, or an action this version does not know (a later driver's),
    which is said rather than judged by nothing, as an unknown action 7 once was."""
    return action is not None and (action in RECOVERY_WARN or action not in RECOVERY_ACTIONS)


def recovery_name(action: int) -> str:
    """How a finding names an XID 154's action."""
    if action == ACTION_UNREAD:
        return "its log line cut before the action"
    return RECOVERY_ACTIONS.get(action, f"action {action:#x}, unknown to this console")

APPLICATION = frozenset({13, 31, 43})
"""The application's own faults (13 a graphics engine exception, 31 an MMU fault at the
application's bad address, 43 its channel reset): a rank one of these named crashed in its own
code or data, not on a bad GPU (docs/domain.md §4). Not 45: the driver's clean-up after any
error, a killed process's included."""
