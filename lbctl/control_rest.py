"""``lbctl balancer pause|resume|status`` over the REST service (``web.control``): the same
flags and output as ``lbctl.control``; who asked is the token's role, as the service reads it."""

from __future__ import annotations

import argparse

from actors.control_status import status_text
from lbctl.admin import emit
from lbctl.admin_http import AdminHttp

PATH = "/bb/v1/balancer"


def _balancer_pause(http: AdminHttp, args: argparse.Namespace) -> int:
    paused = http.call("POST", f"{PATH}/pause", {"for": args.duration, "reason": args.reason})
    emit(args, paused, f"balancer paused until {paused['until_ms']} ms (cluster time), "
                       f"{(paused['until_ms'] - paused['since_ms']) // 1000} s from now: {args.reason}")
    return 0


def _balancer_resume(http: AdminHttp, args: argparse.Namespace) -> int:
    resumed = http.call("POST", f"{PATH}/resume", {})["resumed"]
    if resumed is None:
        emit(args, {"resumed": None}, "not paused")
    else:
        emit(args, {"resumed": resumed}, f"balancer resumed (the pause since {resumed['since_ms']} ms)")
    return 0


def _balancer_status(http: AdminHttp, args: argparse.Namespace) -> int:
    document = http.call("GET", f"{PATH}/status")
    emit(args, document, status_text(document))
    return 0


VERBS = {f.__name__: f for f in (_balancer_pause, _balancer_resume, _balancer_status)}
