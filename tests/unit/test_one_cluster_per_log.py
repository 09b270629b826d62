"""One cluster per log directory: a cluster started on an embedded log another lbctl process is
using is refused by name, on the Ray host as on the in-process one (issue 19 found two
`lbctl run --host ray --keep` writing one log)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from actors.api import Cluster
from actors.cluster.kept import LOG_SUBDIR, lock_directory
from balancer.errors import Unavailable


@pytest.mark.parametrize("host", ["ray", "inproc"])
async def test_a_second_cluster_on_a_used_log_directory_is_refused_by_name(tmp_path: Path, host: str) -> None:
    log_dir = (tmp_path / LOG_SUBDIR).resolve()
    held = lock_directory(log_dir)  # the first `lbctl run --keep`
    try:
        with pytest.raises(Unavailable, match=str(log_dir)):
            await Cluster.start(brokers=1, host=host, log_dir=log_dir)
    finally:
        os.close(held)
