"""The one reading of a process's settings: ``load_settings`` reads broker.conf (and a
deployment's ``conf/cluster.yaml``) once, at the process's entry point, into one immutable
``Settings`` that every host is given.

Invariants:
- the files are read here and at no other place below the entry points (``lbctl``'s verbs,
  ``Cluster.start``/``deploy``/``connect``, a kept cluster's reopening); hosts are handed the
  parts they need: Ray actors and the in-process host and the simulator a ``BodySpec``'s config
  and actor settings, the web service ``web.settings.WebSettings.from_pairs(settings.pairs)``;
- broker.conf's syntax is read once (``balancer.config.read_broker_conf``): the load balancer's
  keys make ``balancer``, the actors' (``balancer.actor_keys``) ``actors``, and every pair as
  read stays in ``pairs`` for the components above the actors (the web service's keys);
- a bad value is one ``ConfigError`` naming its key (and its line); a missing or unreadable file
  names its path; a deployment's ``broker_conf`` is read when no broker.conf is given;
- ``Settings()`` is every default; a ``Settings`` is never changed (``with_overrides`` copies).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from actors.cluster_conf import ClusterConf
from actors.settings import ActorSettings
from balancer.actor_keys import ACTOR_KEY_NAMES, ACTOR_KEYS
from balancer.config import ConfigKey, LoadBalancerConfig, at_line, read_broker_conf
from balancer.config import render_broker_conf as render_balancer_conf
from balancer.errors import ConfigError

ConfSource = str | os.PathLike[str] | LoadBalancerConfig | None
"""What a caller may give for broker.conf: a path, a config already made, or nothing (defaults)."""
Deployment = ClusterConf | str | os.PathLike[str] | None
"""A deployment's ``conf/cluster.yaml``: its path or the file already read."""


@dataclass(frozen=True)
class Settings:
    """Everything a process's settings files say: the load balancer's keys, the actors' timers,
    the deployment (cluster.yaml, None: none) and broker.conf's pairs as read."""

    balancer: LoadBalancerConfig = field(default_factory=LoadBalancerConfig)
    actors: ActorSettings = field(default_factory=ActorSettings)
    deployment: ClusterConf | None = None
    pairs: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), compare=False, repr=False)
    """Every key of broker.conf as read (the web service reads its own keys from them)."""
    source: str | None = field(default=None, compare=False)
    """The broker.conf path they were read from (messages name it; None: no file)."""

    @property
    def balancer_pairs(self) -> dict[str, str]:
        """The pairs the load balancer reads (the actors' keys left out): a base for what-if
        grids and for overrides of a config built elsewhere."""
        return {key: value for key, value in self.pairs.items() if key not in ACTOR_KEY_NAMES}

    def with_overrides(self, values: Mapping[str, Any]) -> Settings:
        """A copy with some keys changed (Pulsar's or the actors'), validated as when read."""
        if not values:
            return self
        actor_values = {k: v for k, v in values.items() if str(k).strip() in ACTOR_KEY_NAMES}
        rest = {k: v for k, v in values.items() if str(k).strip() not in ACTOR_KEY_NAMES}
        return dataclasses.replace(self, balancer=self.balancer.with_overrides(rest) if rest else self.balancer,
                                   actors=actor_settings(actor_values, self.actors))

    def notice(self, applied: Collection[str] = ()) -> str | None:
        """What was read but not used (``LoadBalancerConfig.notice``)."""
        return self.balancer.notice(applied)


def load_settings(conf: ConfSource | Settings = None, *, deployment: Deployment = None,
                  overrides: Mapping[str, Any] | None = None) -> Settings:
    """The settings of this process: broker.conf (a path; a config or ``Settings`` already made
    is taken as it is; None: the deployment's ``broker_conf``, else the defaults), the
    deployment's cluster.yaml, then ``overrides`` (keys as in broker.conf)."""
    found = ClusterConf.load(deployment) if isinstance(deployment, str | os.PathLike) else deployment
    if isinstance(conf, Settings):
        loaded = conf if found is None else dataclasses.replace(conf, deployment=found)
    elif isinstance(conf, LoadBalancerConfig):
        loaded = Settings(balancer=conf, deployment=found)
    elif conf is None and (found is None or found.broker_conf is None):
        loaded = Settings(deployment=found)
    else:
        path = Path(conf if conf is not None else str(found.broker_conf if found else ""))
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"broker.conf {str(path)!r}: cannot read it ({exc.strerror})",
                              value=str(path)) from None
        loaded = settings_from_text(text, source=str(path), deployment=found)
    return loaded.with_overrides(overrides) if overrides else loaded


def settings_from_text(text: str, *, source: str | None = None, deployment: ClusterConf | None = None) -> Settings:
    """``Settings`` of broker.conf text; an error about a key names its line."""
    pairs, lines = read_broker_conf(text)
    try:
        return settings_from_mapping(pairs, source=source, deployment=deployment)
    except ConfigError as exc:
        raise at_line(exc, lines) from None


def settings_from_mapping(values: Mapping[str, Any], *, source: str | None = None,
                          deployment: ClusterConf | None = None) -> Settings:
    """``Settings`` of keys as broker.conf names them (the simulator's scenarios, tests)."""
    pairs = {str(key).strip(): value for key, value in values.items()}
    return Settings(balancer=LoadBalancerConfig.from_mapping(pairs), actors=actor_settings(pairs),
                    deployment=deployment, pairs=MappingProxyType({k: str(v) for k, v in pairs.items()}),
                    source=source)


def actor_settings(values: Mapping[str, Any], base: ActorSettings | None = None) -> ActorSettings:
    """``base`` (default: the defaults) with the actors' keys among ``values`` applied; a bad
    value, or a heartbeat not below the session timeout, is one ``ConfigError`` naming the key."""
    base = base or ActorSettings()
    given = {str(key).strip(): raw for key, raw in values.items()}
    changed = {key.attr: key.parse(key.name, given[key.name]) for key in ACTOR_KEYS if key.name in given}
    if not changed:
        return base
    heartbeat = changed.get("heartbeat_ms", base.heartbeat_ms)
    session = changed.get("session_timeout_ms", base.session_timeout_ms)
    if heartbeat >= session:
        blamed = _key_of("heartbeat_ms" if "heartbeat_ms" in changed else "session_timeout_ms")
        raise ConfigError(f"{blamed}: a heartbeat of {heartbeat} ms must be below the session timeout "
                          f"of {session} ms ({_key_of('session_timeout_ms')}), or healthy brokers expire",
                          key=blamed, value=given[blamed])
    return dataclasses.replace(base, **changed)


def _key_of(attr: str) -> str:
    return next(key.name for key in ACTOR_KEYS if key.attr == attr)


def actor_config_keys() -> tuple[ConfigKey, ...]:
    """The actors' keys with their defaults (``ActorSettings``'), as the shipped file lists them."""
    defaults = ActorSettings()
    return tuple(ConfigKey(key.name, getattr(defaults, key.attr), key.parse, key.doc) for key in ACTOR_KEYS)


def render_broker_conf() -> str:
    """The shipped ``conf/broker.conf``: the load balancer's keys, then the actors' timers."""
    return render_balancer_conf([("the live system's timers and shards (bundle-balancer's actors; "
                                  "times in ms of cluster time)", actor_config_keys())])
