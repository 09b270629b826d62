"""Bad input is refused where it is typed, before any actor sees it: nothing is appended for it.

``check_input`` judges a command on a client's fold of the log with the very rules its writer
applies (the admin input limits, ``actors.limits``; the namespace body's handlers, the leader's
failure-domain check) and raises the same
typed ``InvalidInput`` the writer would. A state conflict (a bundle in flight, an older epoch) is
left to the writer: the client's view may lag, and the writer's verdict on those is final.

Invariants: it reads the follower's state and never changes it; it returns only when the
writer's input rules accept the command (the writer still judges it again, on its own state).
"""

from __future__ import annotations

from actors.body import Follower
from actors.leader_view import check_domain
from actors.limits import check_command
from actors.namespace import NamespaceBody
from balancer.errors import InvalidInput, LoadBalancerError, UnsplittableBundle
from events.catalog import (
    Command,
    DrainBroker,
    PauseBalancer,
    ResumeBalancer,
    ReviewProposal,
    SetFailureDomain,
    SplitBundle,
    UndrainBroker,
)

SELECTED = ("LARGEST", "HOT")
"""Split targets the writer picks from bundle loads the client may not have seen yet."""


def check_input(follower: Follower, command: Command, now_ms: int) -> None:
    """Raise the ``InvalidInput`` the command's writer would refuse ``command`` with."""
    check_command(command, follower.config)
    if isinstance(command, SetFailureDomain):
        check_domain(follower.brokers, follower.ownership.failure_domains, command)
        return
    if isinstance(command, PauseBalancer | ResumeBalancer | DrainBroker | UndrainBroker | ReviewProposal):
        return  # ``Cluster`` judged the duration, the drain or the verdict; the leader judges it again
    judge = NamespaceBody(follower.config)
    judge.ownership, judge.brokers, judge.epoch = follower.ownership, follower.brokers, follower.epoch
    try:
        judge.judge(command, now_ms)
    except UnsplittableBundle:
        if not (isinstance(command, SplitBundle) and command.bundle in SELECTED):
            raise
    except InvalidInput:
        raise
    except LoadBalancerError:
        pass  # a state conflict: the writer decides on the newest state
