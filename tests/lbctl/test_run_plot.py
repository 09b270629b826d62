"""``lbctl run --plot FILE``: the balance-over-time picture of a run, and the bad
paths it refuses before any cluster starts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from matplotlib import image

from lbctl.main import main

CONF = str(Path(__file__).resolve().parents[2] / "conf" / "broker.conf")
SHORT = ["run", "--host", "inproc", "--conf", CONF, "--plain", "--topics", "300", "--bundles", "8",
         "--speed", "0"]


def test_a_run_draws_its_balance_over_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plot = tmp_path / "balance.png"
    assert main([*SHORT, "--minutes", "20", "--plot", str(plot)]) == 0
    assert f"plot: {plot}" in capsys.readouterr().out
    pixels = image.imread(str(plot))[..., :3].reshape(-1, 3)
    colours = np.unique((pixels * 255).astype(np.uint8), axis=0)
    assert pixels.shape[0] > 500 * 400 and len(colours) > 50  # lines in several colours, not blank


@pytest.mark.parametrize(("path", "says"), [("balance.txt", "must end in .png, .svg, .pdf"),
                                            ("missing/balance.png", "no directory")])
def test_a_bad_plot_path_is_one_line_and_exit_2(tmp_path: Path, path: str, says: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*SHORT, "--minutes", "1", "--plot", str(tmp_path / path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and says in captured.err and str(tmp_path / path) in captured.err
    assert len([line for line in captured.err.splitlines() if "error" in line]) == 1
