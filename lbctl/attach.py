"""How a verb finds its cluster: ``lbctl --cluster FILE`` (a deployment), else what ``lbctl run
--keep`` recorded under ``--state-dir`` (default ``$LBCTL_STATE_DIR`` or ``.lbctl``).

Invariants: every verb talks to the one ``actors.api.Cluster``; ``using`` (tests, embedding)
makes every verb of this process use the given cluster, which the verbs then never close.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

from actors.api import Cluster
from actors.cluster.kept import state_dir
from actors.cluster_conf import ClusterConf

_override: list[Cluster] = []


@contextmanager
def using(cluster: Cluster) -> Iterator[Cluster]:
    """Every verb run inside this block talks to ``cluster``."""
    _override.append(cluster)
    try:
        yield cluster
    finally:
        _override.pop()


@asynccontextmanager
async def session(state: str | None, deployment: ClusterConf | str | None = None) -> AsyncIterator[Cluster]:
    """The cluster of the deployment (``--cluster``: its file, or the file as the verb's settings
    read it) or of the state directory, closed afterwards unless it came from ``using``."""
    if _override:
        yield _override[-1]
        return
    if deployment is not None:
        cluster = await Cluster.connect(deployment)
    else:
        cluster = await Cluster.connect(state_dir=state_dir(state))
    try:
        yield cluster
    finally:
        await cluster.close()
