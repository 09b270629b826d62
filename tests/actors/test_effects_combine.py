"""``combine`` is ``+`` folded over its parts, in one pass."""

from __future__ import annotations

from functools import reduce

from hypothesis import given, settings
from hypothesis import strategies as st

from actors.effects import NOTHING, Effects, combine
from balancer.errors import Unavailable
from events.catalog import BrokerLeft, ConfirmOwnership

_ERRORS = [Unavailable("a"), Unavailable("b")]


@st.composite
def _effects(draw: st.DrawFn) -> Effects:
    tag = draw(st.integers(0, 9))
    appends = tuple((f"k{tag}", BrokerLeft(broker_id=f"b{tag}-{i}", reason="graceful"))
                    for i in range(draw(st.integers(0, 2))))
    sends = tuple(ConfirmOwnership(command_id=f"c{tag}-{i}", epoch=1, bundle="a/b/0x0_0x1", owner="b1")
                  for i in range(draw(st.integers(0, 2))))
    return Effects(append=appends, send=sends,
                   reply=draw(st.sampled_from([None, "r1", "r2"])),
                   error=draw(st.sampled_from([None, *_ERRORS])),
                   epoch=draw(st.integers(0, 5)),
                   expected_seq=draw(st.dictionaries(st.sampled_from(["k1", "k2", "k3"]), st.integers(0, 4))),
                   causation_id=draw(st.sampled_from([None, "x", "y"])))


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(_effects(), max_size=8))
def test_combine_equals_adding_the_parts_in_order(parts: list[Effects]) -> None:
    expected = reduce(lambda out, part: out + part, parts, NOTHING)
    got = combine(iter(parts))
    assert (got.append, got.send, got.reply, got.error, got.epoch, dict(got.expected_seq),
            got.causation_id) == (expected.append, expected.send, expected.reply, expected.error,
                                  expected.epoch, dict(expected.expected_seq), expected.causation_id)
