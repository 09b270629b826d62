"""Every command the docs show is run (issue 10): the docs cannot drift from the code.

In ``docs/*.md`` and ``README.md``, a fenced ```` ```console ```` block is a terminal session:
each ``$ `` line is a command (a trailing ``\\`` continues it; a heredoc runs to its end marker),
run by bash from the repository root with the venv's ``lbctl`` first on PATH and
``LBCTL_STATE_DIR`` in a temporary folder (one per page, so the commands of a page share
their cluster); every command must exit 0, unless the next line is ``# exit N``. Lines after a
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
import socket
import subprocess
import sys
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


def environment(state: Path) -> dict[str, str]:
    venv_bin = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": f"{venv_bin}:{os.environ['PATH']}", "LBCTL_STATE_DIR": str(state),
            "RAY_AUTH_MODE": "disabled", "PYSPARK_PYTHON": sys.executable}


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_command_of_the_page_runs(page: Path, tmp_path: Path) -> None:
    env = environment(tmp_path / "state")
    port = free_port()
    ran = 0
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
            done = subprocess.run(["bash", "-c", command.text], cwd=ROOT, env=env, capture_output=True,
                                  text=True, timeout=600)
            shown = f"{page.name}: $ {command.text}\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
            assert done.returncode == command.status, shown
            for expected in command.expect:
                assert expected in done.stdout + done.stderr, f"missing {expected!r}\n{shown}"
            ran += 1
    assert ran or page.name == "README.md", f"{page.name} shows no command"


def test_the_parser_reads_commands_outputs_and_heredocs() -> None:
    block = "$ lbctl decide split - <<'EOF'\n{}\nEOF\n> {\"boundaries\"\n$ false\n# exit 1\n$ make run\n"
    found = commands(block)
    assert [c.text.splitlines()[0] for c in found] == ["lbctl decide split - <<'EOF'", "false"]
    assert found[0].text.endswith("EOF") and found[0].expect == ['{"boundaries"'] and found[1].status == 1
