"""One screen per module: overview, nodes, node detail, jobs, fabric, events."""
