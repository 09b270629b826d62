"""What broker.conf says about ``/metrics`` and the probes: Pulsar's keys, Pulsar's defaults.

- ``exposeBundlesMetricsInPrometheus`` (false): export the per-bundle ``pulsar_bundle_*`` series;
- ``statusFilePath`` (none): the file whose presence ``/status.html`` answers for (an operator
  deletes it to take the service out of a load balancer's rotation).

Invariants: a value other than true/false for the boolean is one ``ConfigError`` naming the key;
an empty ``statusFilePath`` is none, as Pulsar's loader reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from balancer.errors import ConfigError

EXPOSE_BUNDLES = "exposeBundlesMetricsInPrometheus"
STATUS_FILE = "statusFilePath"


@dataclass(frozen=True)
class ObserveSettings:
    """The metrics and probe settings of one broker.conf."""

    expose_bundles: bool = False
    status_file_path: str | None = None

    @classmethod
    def from_pairs(cls, pairs: Mapping[str, str]) -> ObserveSettings:
        raw = pairs.get(EXPOSE_BUNDLES, "").strip().lower() or "false"
        if raw not in ("true", "false"):
            raise ConfigError(f"{EXPOSE_BUNDLES}={pairs[EXPOSE_BUNDLES]}: expected true or false",
                              key=EXPOSE_BUNDLES, value=pairs[EXPOSE_BUNDLES])
        return cls(expose_bundles=raw == "true", status_file_path=pairs.get(STATUS_FILE, "").strip() or None)
