"""Hosts for the actor bodies: ray.py (the deployment) and sim.py (one process, virtual clock, faults)."""
