"""The fault simulator: the actor bodies on a seeded, faulty in-process host (docs/design/simulator.md).

``host`` (``SimHost``: faulty deliveries, lagging subscriptions, log outages, the trail),
``scenarios`` (the seeded fault plans), ``hostile`` (corrupt, forged and zombie writes),
``checks`` (the invariants) and ``run`` (one seed end to end; ``minimize``).
"""

from actors.runtime.sim.host import DeliveryFaults, Fault, SimHost

__all__ = ["DeliveryFaults", "Fault", "SimHost"]
