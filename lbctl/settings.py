"""A verb's settings: the process's one ``actors.conf.Settings``, made from the verb's ``--conf``
(broker.conf) and ``lbctl --cluster FILE`` (a deployment's cluster.yaml) the first time a part
of the verb asks (``settings_of``), then kept with the parsed arguments.

Invariants: every part of one verb reads the same value, and each file is read at most once per
process; without ``--conf`` the settings are the defaults (a deployment's ``broker_conf`` is
``lbctl run``'s to read: it starts the deployment); a bad file is one ``ConfigError``.
"""

from __future__ import annotations

import argparse

from actors.cluster_conf import ClusterConf
from actors.conf import Settings, load_settings

_KEPT = "_settings"


def settings_of(args: argparse.Namespace) -> Settings:
    """The settings of this verb's files (read on the first call, kept on ``args``)."""
    kept = vars(args).get(_KEPT)
    if isinstance(kept, Settings):
        return kept
    conf = getattr(args, "conf", None)
    loaded = load_settings(conf if conf else Settings(), deployment=getattr(args, "cluster_conf", None))
    setattr(args, _KEPT, loaded)
    return loaded


def deployment_of(args: argparse.Namespace) -> ClusterConf | None:
    """``lbctl --cluster FILE``'s deployment (None: no such flag)."""
    return settings_of(args).deployment
