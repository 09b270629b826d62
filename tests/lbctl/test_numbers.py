"""Bad numbers and the errors a user reads: every numeric flag of lbctl refuses NaN, infinities and
values out of its range with one line naming the flag (exit 2) before any work; a bundle that
does not exist is an error for ``explain``; unloading a bundle no broker owns is bad input like
its siblings (one prefix, one exit code); no ``None`` reaches the user's text.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.api import Cluster
from actors.cluster.inproc_link import InProcLink
from actors.runtime import InProcessHost
from balancer.ownership import BundleState
from events.catalog import NamespaceCreated
from events.log.local import LocalEventLog
from lbctl import numargs
from lbctl.attach import using
from lbctl.main import build_parser, main
from tests.support.cluster_scenarios import make_host, place_all


def lbctl(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:  # argparse's usage errors end the parse
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


BAD_NUMBERS = [
    (["run", "--minutes", "NaN"], "--minutes", "'NaN' is not a finite number"),
    (["run", "--minutes", "inf"], "--minutes", "'inf' is not a finite number"),
    (["run", "--minutes", "0"], "--minutes", "'0' must be > 0"),
    (["run", "--speed", "nan"], "--speed", "'nan' is not a finite number"),
    (["run", "--speed", "-1"], "--speed", "'-1' must be >= 0"),
    (["run", "--brokers", "0"], "--brokers", "'0' must be >= 1"),
    (["run", "--brokers", "2.5"], "--brokers", "'2.5' is not an integer"),
    (["run", "--rate", "1e999"], "--rate", "'1e999' is not a finite number"),
    (["run", "--web-service-port", "70000"], "--web-service-port", "between 0 and 65535"),
    (["namespaces", "unload", "public/default", "--timeout", "nan"], "--timeout", "not a finite number"),
    (["namespaces", "unload", "public/default", "--timeout", "0"], "--timeout", "'0' must be > 0"),
    (["namespaces", "create", "public/x", "-b", "0"], "-b/--bundles", "'0' must be >= 1"),
    (["sim", "--seeds", "-3"], "--seeds", "'-3' must be >= 1"),
    (["sim", "--steps", "inf"], "--steps", "'inf' is not an integer"),
    (["attach", "http://127.0.0.1:1", "--minutes=-inf"], "--minutes", "not a finite number"),
    (["attach", "http://127.0.0.1:1", "--poll-s", "nan"], "--poll-s", "not a finite number"),
    (["replay", "audit", "x", "--in-flight-ms", "nan"], "--in-flight-ms", "is not an integer"),
    (["log", "tail", "--log-dir", "x", "--limit", "0"], "--limit", "'0' must be >= 1"),
    (["pulsar", "traffic", "--rate", "nan"], "--rate", "not a finite number"),
    (["decide", "shed", "-", "--indent", "-1"], "--indent", "'-1' must be >= 0"),
]


@pytest.mark.parametrize(("argv", "flag", "why"), BAD_NUMBERS, ids=[" ".join(a) for a, _, _ in BAD_NUMBERS])
def test_a_bad_number_is_one_line_naming_the_flag_and_exit_2(
        argv: list[str], flag: str, why: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = lbctl(capsys, *argv)
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"lbctl: error: argument {flag}") and why in err, err
    assert "Traceback" not in err


def _actions(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _actions(child, f"{path} {name}")
        else:
            yield path, action


def test_every_numeric_flag_goes_through_the_shared_validator() -> None:
    raw = [f"{path} {'/'.join(a.option_strings) or a.dest}" for path, a in _actions(build_parser(), "lbctl")
           if a.type in (int, float)]
    assert raw == [], f"numeric flags typed with bare int/float (use lbctl.numargs): {raw}"


def test_a_usage_error_anywhere_has_the_one_prefix(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["run", "--host", "nope"], ["no-such-verb"], ["namespaces", "unload"]):
        code, _, err = lbctl(capsys, *argv)
        assert code == 2 and len(err.splitlines()) == 1 and err.startswith("lbctl: error: "), err


def test_the_validators_accept_what_is_in_range() -> None:
    assert numargs.POSITIVE("0.5") == 0.5 and numargs.NON_NEGATIVE("0") == 0.0
    assert numargs.COUNT(" 7 ") == 7 and numargs.PORT("0") == 0 and numargs.NATURAL("0") == 0
    with pytest.raises(argparse.ArgumentTypeError, match=r"'-0\.1' must be >= 0"):
        numargs.NON_NEGATIVE("-0.1")


# -- bundles that are not there, and bundles nobody owns -------------------------------------------


@pytest.fixture
def host() -> Iterator[InProcessHost]:
    cluster = make_host()
    place_all(cluster)
    with using(Cluster(InProcLink(cluster))):
        yield cluster


async def _created(directory: Path) -> None:
    log = LocalEventLog(directory)
    try:
        await log.append("t/a", [NamespaceCreated(namespace="t/a", boundaries=[0, 0x80000000, 0xFFFFFFFF])],
                         epoch=1)
    finally:
        await log.close()


def test_explain_of_a_bundle_no_record_names_is_an_error(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    asyncio.run(_created(tmp_path / "log"))
    log_dir = str(tmp_path / "log")
    code, out, err = lbctl(capsys, "explain", "t/a/0x1_0x2", "--log-dir", log_dir)
    assert (code, out) == (2, "") and err.startswith("lbctl: error: ") and "0x1_0x2" in err
    code, out, err = lbctl(capsys, "explain", "t/a/0x00000001_0x00000002", "--log-dir", log_dir)
    assert (code, out) == (2, "") and "t/a/0x00000001_0x00000002" in err
    assert "in no record of the log" in err and len(err.splitlines()) == 1
    # A bundle the namespace was created with exists even before its first move.
    code, out, _ = lbctl(capsys, "explain", "t/a/0x80000000_0xffffffff", "--log-dir", log_dir)
    assert code == 0 and "no moves in the log" in out


def test_unloading_a_free_bundle_is_bad_input_like_its_siblings(
        host: InProcessHost, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = lbctl(capsys, "namespaces", "split-bundle", "public/a", "-b", "0x00000000_0x40000000",
                         "-san", "range_equally_divide", "-u")
    assert code == 0 and "None" not in out
    child = "public/a/0x00000000_0x20000000"
    assert host.view.state(child) is BundleState.FREE
    code, out, err = lbctl(capsys, "namespaces", "unload", "public/a", "-b", "0x00000000_0x20000000")
    assert (code, out) == (2, "")
    assert err.strip() == (f"lbctl: error: {child} is Free: no broker owns it, so it cannot be "
                           "unloaded; the leader assigns it first")
    code, _, err = lbctl(capsys, "namespaces", "unload", "public/a", "-b", "0x00000000_0x00000001")
    assert code == 2 and err.startswith("lbctl: error: ")  # a sibling: the same prefix and status
