"""Where simulated nodes sit: racks, rail-aligned InfiniBand leaf groups and spine groups.

ND H100 v5 fabrics are rail-optimised: HCA ``mlx5_ibK`` of every node (the NIC beside GPU K)
goes to the rail-K leaf switch of the node's scalable unit. A *leaf group* is that set of eight
rail switches serving ``nodes_per_leaf`` nodes; the birth's ``topology.leaf`` names the group
(``leaf03``) and a single switch is ``leaf03-r5`` (rail 5). Leaf groups hang off spine groups.
Names are hostlist-friendly: ``gpu0001 … gpu4096`` compress to ``gpu[0001-4096]``.
"""

from dataclasses import dataclass

from fleetdeck.protocol.messages import Topology

RAILS = 8
"""One rail per GPU/HCA pair."""


@dataclass(frozen=True, slots=True)
class TopologySpec:
    nodes_per_rack: int = 4
    """ND H100 v5 racks hold few nodes (about 10 kW each)."""
    nodes_per_leaf: int = 16
    """Nodes per rail-aligned leaf group; 16-32 is typical of a scalable unit."""
    leaves_per_spine_group: int = 8

    def __post_init__(self) -> None:
        for name in ("nodes_per_rack", "nodes_per_leaf", "leaves_per_spine_group"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")


def node_names(n: int, prefix: str = "gpu", start: int = 1) -> list[str]:
    """``gpu0001 … gpuNNNN``: zero-padded so names sort and compress into hostlists."""
    width = max(4, len(str(start + n - 1)))
    return [f"{prefix}{i:0{width}d}" for i in range(start, start + n)]


def topology_for(index: int, spec: TopologySpec) -> Topology:
    """Topology of the node at 0-based ``index`` in name order."""
    leaf = index // spec.nodes_per_leaf
    return Topology(
        rack=f"rack{index // spec.nodes_per_rack + 1:03d}",
        leaf=leaf_name(leaf),
        spine_group=f"spine{leaf // spec.leaves_per_spine_group + 1:02d}",
    )


def leaf_name(leaf_index: int) -> str:
    return f"leaf{leaf_index + 1:02d}"


def rail_switch(leaf: str, rail: int) -> str:
    """The switch that carries rail ``rail`` of a leaf group, e.g. ``leaf03-r5``."""
    return f"{leaf}-r{rail}"
