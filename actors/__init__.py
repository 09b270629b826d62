"""The live system: broker, namespace and leader actor bodies, their hosts (Ray, simulator) and the Cluster API.

``from actors import Cluster`` loads the client lazily, so importing a body (which is
Ray-free) never imports Ray.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from actors.api import Cluster

__all__ = ["Cluster"]


def __getattr__(name: str) -> Any:
    if name == "Cluster":
        from actors.api import Cluster

        return Cluster
    raise AttributeError(f"module 'actors' has no attribute {name!r}")
