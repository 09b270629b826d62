"""Every command the docs show is run: the docs cannot drift from the code.

In ``docs/*.md`` and ``README.md``, a fenced ```` ```console ```` block is a terminal session:
each ``$ `` line is a command (a trailing ``\\`` continues it; a heredoc runs to its end marker).
A page's commands run exactly as printed, one after the other in ONE bash session started in the
repository root (what a reader's terminal keeps, an activated venv, a ``cd``, an ``export``,
carries to the next command), with ``PATH`` as the test found it minus any virtualenv: so the
README runs as a reader on a fresh clone types it (``make run``, then its own activation line);
the ``docs/`` pages assume the README's setup and start with the venv activated, as its readers
are. ``LBCTL_STATE_DIR`` is a temporary folder (one per page, so the commands of a page share
their cluster). Every command must exit 0, unless the next line is ``# exit N``. Lines after a
command are its shown output: each one that starts with ``> `` must appear in what it printed.
A ```` ```python ```` block runs as a script from the repository root. ``make`` commands (the two
the README starts with) are what CI itself runs; compose/README.md's docker commands run in
tests/integration/test_compose.py where a Docker engine answers.

A page's fixed example port (``DOC_PORT``, 18080) is run as a free port chosen for that run, so
two suites on one machine (or a port some other program holds) never collide; everything else
runs exactly as the page shows it.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```", re.S | re.M)
HEREDOC = re.compile(r"<<-?\s*'?(\w+)'?")
DOC_PORT = "18080"


def free_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return str(probe.getsockname()[1])


@dataclass
class Command:
    text: str
    expect: list[str] = field(default_factory=list)
    status: int = 0


def commands(block: str) -> list[Command]:
    found: list[Command] = []
    lines = block.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.startswith("$ "):
            if found and line.startswith("> "):
                found[-1].expect.append(line[2:])
            elif found and (m := re.fullmatch(r"# exit (\d+)", line.strip())):
                found[-1].status = int(m[1])
            continue
        text = line[2:]
        while text.endswith("\\") and i < len(lines):
            text, i = text + "\n" + lines[i], i + 1
        end = HEREDOC.search(text)
        if end is not None:
            while i < len(lines):
                text, i = text + "\n" + lines[i], i + 1
                if lines[i - 1].strip() == end[1]:
                    break
        if not text.startswith("make "):
            found.append(Command(text))
    return found


def blocks(page: Path) -> list[tuple[str, str]]:
    return [(m[1], m[2]) for m in FENCE.finditer(page.read_text())]


VENV_BIN = Path(sys.executable).parent
ACTIVATE = f". {VENV_BIN / 'activate'}"
"""The docs pages' setup: the README tells its reader to activate the venv once."""


def environment(state: Path) -> dict[str, str]:
    """The test's environment without any virtualenv on PATH: a bare ``lbctl`` is only found
    after the page (or, for docs/, the README's setup) activates one."""
    hidden = {str(VENV_BIN), *(f"{v}/bin" for v in [os.environ.get("VIRTUAL_ENV")] if v)}
    path = ":".join(p for p in os.environ["PATH"].split(":") if p and p not in hidden)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONHOME")}
    return {**env, "PATH": path, "LBCTL_STATE_DIR": str(state), "RAY_AUTH_MODE": "disabled",
            "PYSPARK_PYTHON": sys.executable}


class Shell:
    """One bash session for a page: each command runs in it (``source``d from a file, so heredocs
    and continuations stay exactly as printed) with its own output files and exit status."""

    def __init__(self, env: dict[str, str], scratch: Path) -> None:
        self.scratch = scratch
        scratch.mkdir(parents=True, exist_ok=True)
        self.count = 0
        self.proc = subprocess.Popen(["bash", "--norc", "--noprofile"], cwd=ROOT, env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)

    def run(self, text: str, timeout: float = 600) -> tuple[int, str, str]:
        self.count += 1
        base = self.scratch / f"cmd{self.count}"
        script, out, err, rc = (base.with_suffix(s) for s in (".sh", ".out", ".err", ".rc"))
        script.write_text(text + "\n")
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"source {script} > {out} 2> {err} < /dev/null; "
                              f"echo $? > {rc}.tmp; mv {rc}.tmp {rc}\n")
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        while not rc.exists():
            if self.proc.poll() is not None:
                return 255, out.read_text(), err.read_text() + "\n(the page's shell exited)"
            if time.monotonic() > deadline:
                self.close()
                raise AssertionError(f"timed out after {timeout:.0f} s: $ {text}")
            time.sleep(0.05)
        return int(rc.read_text()), out.read_text(), err.read_text()

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_command_of_the_page_runs(page: Path, tmp_path: Path) -> None:
    env = environment(tmp_path / "state")
    shell = Shell(env, tmp_path / "shell")
    port = free_port()
    ran = 0
    try:
        if page.name != "README.md":
            assert shell.run(ACTIVATE)[0] == 0
        for kind, body in blocks(page):
            body = body.replace(DOC_PORT, port)
            if kind == "python":
                done = subprocess.run([sys.executable, "-c", body], cwd=ROOT, env=env, capture_output=True,
                                      text=True, timeout=600)
                assert done.returncode == 0, f"{page.name}: python block failed:\n{body}\n{done.stderr[-3000:]}"
                ran += 1
            if kind != "console":
                continue
            for command in commands(body):
                code, out, err = shell.run(command.text)
                shown = f"{page.name}: $ {command.text}\n--- stdout\n{out[-3000:]}\n--- stderr\n{err[-3000:]}"
                assert code == command.status, shown
                for expected in command.expect:
                    assert expected in out + err, f"missing {expected!r}\n{shown}"
                ran += 1
    finally:
        shell.close()
    assert ran or page.name == "README.md", f"{page.name} shows no command"


def test_a_bare_lbctl_needs_the_activation_the_readme_prints(tmp_path: Path) -> None:
    """The tour's first commands, in a fresh shell: before the README's activation line a bare
    ``lbctl`` is not found (exit 127), after it it runs."""
    shell = Shell(environment(tmp_path / "state"), tmp_path / "shell")
    try:
        assert shell.run("lbctl --version")[0] == 127
        readme = (ROOT / "README.md").read_text()
        activation = next(c.text for _, body in blocks(ROOT / "README.md") for c in commands(body)
                          if "activate" in c.text)
        first_bare = readme.index("\n$ lbctl ")
        assert readme.index(activation) < first_bare, "the README activates the venv after a bare lbctl"
        assert shell.run(activation)[0] == 0
        code, out, _ = shell.run("lbctl --version")
        assert code == 0 and out.startswith("lbctl ")
    finally:
        shell.close()


def test_the_parser_reads_commands_outputs_and_heredocs() -> None:
    block = "$ lbctl decide split - <<'EOF'\n{}\nEOF\n> {\"boundaries\"\n$ false\n# exit 1\n$ make run\n"
    found = commands(block)
    assert [c.text.splitlines()[0] for c in found] == ["lbctl decide split - <<'EOF'", "false"]
    assert found[0].text.endswith("EOF") and found[0].expect == ['{"boundaries"'] and found[1].status == 1


def test_the_readme_counts_the_simulator_scenarios_it_has() -> None:
    from actors.runtime.sim.scenarios import SCENARIOS

    words = {7: "seven", 8: "eight", 9: "nine", 10: "ten"}
    rotating = sum(1 for s in SCENARIOS.values() if s.rotation)
    text = " ".join((ROOT / "README.md").read_text().split())
    assert f"across {words[len(SCENARIOS)]} scenarios ({words[rotating]} that the seeds take in turn" in text
