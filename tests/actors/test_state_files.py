"""One file name per kind of file: a state directory's record of a kept cluster and an embedded
log directory's pointer to its running Ray cluster are named apart, and a log directory written
before they were still leads to its cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from actors.cluster.kept import LOG_SUBDIR, STATE_FILE, ClusterSpec, read_spec, write_spec
from actors.deploy import OLD_RAY_FILE, RAY_FILE, read_ray_file, remove_ray_file, write_ray_file
from balancer.errors import InvalidInput


def test_the_two_kinds_of_file_have_names_of_their_own(tmp_path: Path) -> None:
    state = tmp_path / "state"
    write_spec(state, ClusterSpec(host="ray", log_dir=str(state / LOG_SUBDIR)))
    write_ray_file(str(state), {"ray_address": "127.0.0.1:1", "ray_namespace": "n"})
    assert STATE_FILE != RAY_FILE
    assert read_spec(state).host == "ray"  # the pointer beside it changes nothing
    assert read_ray_file(state)["ray_namespace"] == "n"


def test_a_log_directory_written_before_still_leads_to_its_ray_cluster(tmp_path: Path) -> None:
    (tmp_path / OLD_RAY_FILE).write_text(json.dumps({"ray_address": "127.0.0.1:1", "ray_namespace": "old"}))
    assert read_ray_file(tmp_path)["ray_namespace"] == "old"
    write_ray_file(str(tmp_path), {"ray_address": "127.0.0.1:2", "ray_namespace": "new"})
    assert read_ray_file(tmp_path)["ray_namespace"] == "new"  # the new name first
    remove_ray_file(str(tmp_path))
    assert not (tmp_path / RAY_FILE).exists()


def test_no_pointer_is_named(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match=RAY_FILE):
        read_ray_file(tmp_path)
