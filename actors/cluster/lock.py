"""One cluster per embedded log: the lock every process that writes a kept log directory takes.

Invariant: while one process holds a directory's lock, another's ``lock_directory`` raises
``Unavailable`` naming the directory at once (it never waits); the lock dies with its process.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from balancer.errors import Unavailable


def lock_directory(log_dir: Path) -> int:
    """An exclusive flock on the embedded log in ``log_dir``, taken by every process that writes
    it (in-process and Ray-hosted clusters alike: one cluster per log), or ``Unavailable``
    naming the directory. Closing the returned descriptor releases it."""
    log_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(log_dir / "lbctl.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise Unavailable(f"the cluster in {str(log_dir)!r} is in use by another lbctl process; "
                          "wait for it to finish") from None
    return fd
