"""One cluster per log directory: `lbctl run --keep` on a state directory another lbctl process
is using is refused by name, on the Ray host as on the in-process one (issue 19 found two
`lbctl run --host ray --keep` writing one log)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from balancer.config import LoadBalancerConfig
from balancer.errors import Unavailable
from lbctl.backend import ClusterSpec
from lbctl.inproc_backend import LOG_SUBDIR, lock_directory
from lbctl.ray_backend import RayBackend


async def test_a_second_ray_cluster_on_a_used_log_directory_is_refused_by_name(tmp_path: Path) -> None:
    held = lock_directory((tmp_path / LOG_SUBDIR).resolve())  # the first `lbctl run --keep`
    try:
        with pytest.raises(Unavailable, match=str(tmp_path / LOG_SUBDIR)):
            await RayBackend.start(ClusterSpec(host="ray"), config=LoadBalancerConfig(), keep_in=tmp_path)
    finally:
        os.close(held)
