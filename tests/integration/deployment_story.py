"""What a deployment (``lbctl --cluster cluster.yaml``) says about a bundle, for failure messages.

Read-only: ``explain`` from the Kafka log, ``balancer status`` from the leader and ``brokers
list``; a verb that fails is shown with its error rather than hiding the rest.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from tests.support.patience import patient

ROOT = Path(__file__).resolve().parents[2]
LBCTL = str(Path(sys.executable).parent / "lbctl")


def deployment_story(deployment: Path, bundle_range: str) -> str:
    settings = yaml.safe_load(deployment.read_text())
    explain = [LBCTL, "explain", f"public/default/{bundle_range}", "--bootstrap",
               settings["kafka"]["bootstrap_servers"], "--cluster", settings["name"]]
    status = [LBCTL, "--cluster", str(deployment), "balancer", "status", "--json"]
    brokers = [LBCTL, "--cluster", str(deployment), "brokers", "list"]
    said = [subprocess.run(argv, capture_output=True, text=True, timeout=patient(120), cwd=ROOT)
            for argv in (explain, status, brokers)]
    return "".join(f"\n{title}:\n{done.stdout}{done.stderr}"
                   for title, done in zip(("explain", "balancer status", "brokers"), said, strict=True))
