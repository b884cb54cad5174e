"""A simulated ND H100 v5 fleet: node physics, topology, a scheduler and scripted faults."""
