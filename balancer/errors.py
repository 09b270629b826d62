"""Every error the project raises, as one tree with a single root.

Invariants:
- every error is a ``LoadBalancerError`` with a stable ``code`` (used in CommandRejected events and
  by ``lbctl`` output) and a ``retriable`` flag;
- messages name the offending value and, where there is one, what would be accepted;
- ``lbctl`` maps any ``InvalidInput`` to exit status 2.

    LoadBalancerError
    ├── InvalidInput                  (the caller's fault; retrying cannot help)
    │   ├── ConfigError               unknown key, bad value, bad combination
    │   ├── InvalidBundle             not a range, not a bundle of the namespace
    │   ├── UnsplittableBundle        a one-hash range, or no boundary possible
    │   ├── UnknownStrategy
    │   ├── UnknownNamespace / UnknownBroker / UnknownBundle / UnknownFailureDomain
    │   ├── UnknownProposal / ProposalClosed   no such proposal; a verdict it cannot take
    │   ├── NamespaceExists
    │   ├── TransferToCurrentOwner
    │   ├── BundleNotOwned            unload/split of a bundle no broker owns or is moving (Free)
    │   └── MalformedInput            JSON/shape errors in decide input
    │       └── InputTooLarge         a string, list or number past its limit
    ├── StateConflict                 the world moved (stale epoch, invalid transition, fenced)
    │   ├── BrokerInOtherDomain       a broker already in another failure domain
    │   ├── StaleEpoch
    │   ├── InvalidTransition
    │   ├── WriterFenced
    │   ├── HistoryMissing            the log lost records a body would have to fold
    │   └── LogDamaged                the log's files are no single history (named; refused)
    ├── Unavailable                   retriable: a log, an actor or a broker is not reachable
    │   ├── NoBrokerAvailable
    │   └── Busy                      an actor too far behind to take the command: retry after T
    ├── DecodeError                   bytes that are not an event (becomes a dead letter)
    ├── OutOfRange                    a record no reader could decode: the writer refuses it
    └── BrokerFilterError             a placement filter could not decide
"""

from __future__ import annotations

from typing import Any, ClassVar


class LoadBalancerError(Exception):
    """Root of every error raised by bundle-balancer."""

    code: ClassVar[str] = "error"
    retriable: ClassVar[bool] = False

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        """The error as stored in a CommandRejected event."""
        return {"code": self.code, "message": self.message, "retriable": self.retriable}


class InvalidInput(LoadBalancerError):
    code = "invalid_input"


class ConfigError(InvalidInput):
    code = "config_error"


class MalformedInput(InvalidInput):
    code = "malformed_input"


class InputTooLarge(MalformedInput):
    """A string, list or number of admin input beyond its limit (the message names the limit
    and its broker.conf key)."""

    code = "input_too_large"


class InvalidBundle(InvalidInput):
    code = "invalid_bundle"


class UnsplittableBundle(InvalidInput):
    code = "unsplittable_bundle"


class UnknownStrategy(InvalidInput):
    code = "unknown_strategy"


class UnknownNamespace(InvalidInput):
    code = "unknown_namespace"


class UnknownBroker(InvalidInput):
    code = "unknown_broker"


class UnknownBundle(InvalidInput):
    code = "unknown_bundle"


class UnknownFailureDomain(InvalidInput):
    code = "unknown_failure_domain"


class UnknownProposal(InvalidInput):
    code = "unknown_proposal"


class ProposalClosed(InvalidInput):
    """A verdict on a proposal that can no longer take it (approving a stale, rejected,
    cancelled or executed one)."""

    code = "proposal_closed"


class NamespaceExists(InvalidInput):
    code = "namespace_exists"


class TransferToCurrentOwner(InvalidInput):
    code = "transfer_to_current_owner"


class BundleNotOwned(InvalidInput):
    """A move asked of a bundle at rest without an owner (Free, never assigned): the request is
    wrong whatever the timing, unlike a bundle in flight (``InvalidTransition``)."""

    code = "bundle_not_owned"


class ForeignCluster(InvalidInput):
    """A log founded by another cluster than the one a process belongs to."""

    code = "foreign_cluster"


class StateConflict(LoadBalancerError):
    code = "state_conflict"


class BrokerInOtherDomain(StateConflict):
    """A failure domain may not take a broker another domain holds (Pulsar answers 409)."""

    code = "broker_in_other_domain"


class StaleEpoch(StateConflict):
    code = "stale_epoch"


class InvalidTransition(StateConflict):
    code = "invalid_transition"


class WriterFenced(StateConflict):
    code = "writer_fenced"


class HistoryMissing(StateConflict):
    """Records a body needs were deleted from the log (Kafka retention) before it folded them:
    it cannot be rebuilt, and starting it on what is left would fold a different history."""

    code = "history_missing"


class LogDamaged(StateConflict):
    """The files of an embedded log do not form one history (records missing between two
    segments, a data file gone, two segments claiming the same offsets with other records):
    nothing in the data says which is true, so readers and writers refuse until an operator
    moves the named file."""

    code = "log_damaged"


class Unavailable(LoadBalancerError):
    code = "unavailable"
    retriable = True


class NoBrokerAvailable(Unavailable):
    code = "no_broker_available"


class Busy(Unavailable):
    """The receiver did not take the command (nothing decided): send it again after
    ``retry_after_ms``, not before."""

    code = "busy"

    def __init__(self, message: str, *, retry_after_ms: int = 1_000, **details: Any) -> None:
        # A default, because an exception is rebuilt from its message alone (then its
        # attributes restored) when it crosses a process boundary (pickle, a Ray answer).
        super().__init__(message, retry_after_ms=retry_after_ms, **details)
        self.retry_after_ms = retry_after_ms


class DecodeError(LoadBalancerError):
    code = "decode_error"


class OutOfRange(LoadBalancerError):
    """A writer asked to stamp a record (seq, epoch or time) outside what every reader decodes."""

    code = "out_of_range"


class BrokerFilterError(LoadBalancerError):
    """A broker filter could not decide (Pulsar's ``BrokerFilterException``)."""

    code = "broker_filter_error"


ERRORS_BY_CODE: dict[str, type[LoadBalancerError]] = {
    cls.code: cls
    for cls in (
        LoadBalancerError, InvalidInput, ConfigError, MalformedInput, InputTooLarge, InvalidBundle,
        UnsplittableBundle, UnknownStrategy, UnknownNamespace, UnknownBroker, UnknownBundle,
        UnknownFailureDomain, UnknownProposal, ProposalClosed, NamespaceExists, TransferToCurrentOwner, BundleNotOwned, ForeignCluster,
        StateConflict, BrokerInOtherDomain, StaleEpoch, InvalidTransition,
        WriterFenced, HistoryMissing, LogDamaged, Unavailable, NoBrokerAvailable, DecodeError,
        OutOfRange, BrokerFilterError,
    )
}
