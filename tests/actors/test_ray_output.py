"""What Ray's driver prints goes where a user expects it: a verb's stdout holds its output only."""

from __future__ import annotations

import pytest
from ray._private import worker

from actors.runtime.ray import cluster_errors_to_stderr


def test_an_error_the_cluster_pushes_to_a_driver_is_printed_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    cluster_errors_to_stderr()
    cluster_errors_to_stderr()  # twice: still one hop, not two
    dead = "The node with node id: abc and address: 127.0.0.1 has been marked dead"
    worker.print_to_stdstream({"lines": [dead], "pid": "raylet", "is_err": False}, ignore_prefix=False)
    out, err = capsys.readouterr()
    assert out == "" and dead in err and err.count(dead) == 1
