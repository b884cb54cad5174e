"""How much memory a simulated fleet takes, and a plain refusal of one this machine cannot hold.

An extra 0 typed in ``--nodes`` otherwise means minutes of silent building, then swap or the
OOM killer taking the machine down with everything else on it.
"""

from fleetdeck.errors import UserError
from fleetdeck.runtime import available_memory

NODE_KIB_LIVE = 128
"""One simulated node with its own MQTT session: bench/sim_capacity.py measured 531 MiB RSS at
4,096 nodes in one process (docs/performance.md)."""
NODE_KIB_OFFLINE = 40
"""The same without a session (``sim --out``): the simulated world alone, 35 KiB a node."""


def refuse_unless_it_fits(nodes: int, offline: bool = False, spread: bool = True) -> None:
    """Raise a one-sentence :class:`UserError` when ``nodes`` simulated nodes need more memory
    than the kernel says is available (not checked where that is unknown). ``spread``: say the
    fleet can be spread over machines (not for a run into a file, nor the demo)."""
    have = available_memory()
    kib = NODE_KIB_OFFLINE if offline else NODE_KIB_LIVE
    need = nodes * kib * 1024
    if have is None or need <= have:
        return
    elsewhere = ("" if offline or not spread else
                 " here, or spread the fleet over machines (one 'fleetdeck sim --prefix' each)")
    raise UserError(f"--nodes {nodes:,} needs about {_size(need)} of memory ({kib} KiB a "
                    f"simulated node) and this machine has {_size(have)} available; simulate "
                    f"fewer nodes{elsewhere}.")


def _size(n: int) -> str:
    return f"{n / 2**40:,.1f} TiB" if n >= 2**40 else f"{n / 2**30:,.1f} GiB"
