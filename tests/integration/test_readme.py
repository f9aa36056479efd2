"""README.md's walkthroughs, run as written, in order, as a newcomer would.

The blocks of "Three ways to use it" are read from README.md itself, so a
command changed there is the command run here. Each ```sh block is one
terminal's turn:

- a line `scripts/run.sh ...` (commented `# terminal 1`) starts run.sh in the
  background, as terminal 1 does, and waits until it says mongoguard listens;
  its log is terminal 1's output;
- a line `# Ctrl-C in terminal 1...` stops it with SIGINT to its process
  group, as the terminal does (run.sh stops mongoguard, which drains, then FerretDB): one
  Ctrl-C must drain once; the end of the walkthroughs stops it too;
- every other line (backslash continuations joined) runs in terminal 2 with
  bash, in a scratch directory laid out like a fresh clone (scripts/,
  configs/ and the built build/ linked in, a fresh FerretDB data directory).

The fenced blocks that follow a ```sh block, up to the next one, are what
the README says came out: ``` and ```json blocks are checked (```text
blocks are illustrations, not checked). A plain block's lines must each be
found in terminal 2's output of that turn or in terminal 1's log since the
last turn, with numbers, hashes and times masked ("shape", not values); a
JSON block's findings must each match one of the log's findings in rule,
action, namespace, command, shape, detail and suggestion. A command exits 0,
except where the block shown after it holds a `MongoServerError` (a block),
where it exits 1 as the README says.

run.sh gets free ports through MG_LISTEN and MG_FERRETDB_PORT, and the
README's 27018 and 27117 are replaced with them; MG_MONGOGUARD and
MG_FERRETDB point it at the binaries under test, so it does not run setup.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import ROOT, ferretdb_binary, free_port, mongoguard_binary

README = ROOT / "README.md"


def walkthrough_blocks() -> list[tuple[str, str]]:
    """(info string, body) of every fenced block of "Three ways to use it"."""
    text = README.read_text()
    start = text.index("## Three ways to use it")
    end = text.index("\n## Configuration at a glance", start)
    return [(m.group(1), m.group(2))
            for m in re.finditer(r"^```(\w*)\n(.*?)^```$", text[start:end], re.S | re.M)]


CTRL_C = "# Ctrl-C in terminal 1"


def commands(body: str) -> list[str]:
    """The block's commands, and CTRL_C where the block says to press it."""
    out, cur = [], ""
    for line in body.splitlines():
        if line.startswith(CTRL_C):
            out.append(CTRL_C)
            continue
        if cur:
            cur += "\n" + line
        elif line.strip() and not line.lstrip().startswith("#"):
            cur = line
        else:
            continue
        if not cur.endswith("\\"):
            out.append(cur)
            cur = ""
    return out


MASKS = [
    (re.compile(r"\d{4}-\d\d-\d\dT[\d:.]+Z"), "T"),
    (re.compile(r"\b[0-9a-f]{16}\b"), "H"),
    (re.compile(r"\d+(\.\d+)?"), "N"),
]


def mask(line: str) -> str:
    for rx, rep in MASKS:
        line = rx.sub(rep, line)
    return line.strip()


FINDING_KEYS = ("rule", "action", "ns", "command", "shape", "detail", "suggestion")


def findings(lines: list[str]) -> list[dict]:
    out = []
    for line in lines:
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if isinstance(d, dict) and d.get("c") == "ANALYZER" and "rule" in d.get("attr", {}):
            out.append(d["attr"])
    return out


class Terminal1:
    """scripts/run.sh in the background, as a person runs it in a terminal."""

    def __init__(self, cwd: Path, env: dict, log_dir: Path):
        self.cwd, self.env, self.log_dir = cwd, env, log_dir
        self.proc = None
        self.n = 0
        self.lines: list[str] = []  # the whole log of every run so far
        self.seen = 0  # lines already shown to a check

    def start(self, cmd: str) -> None:
        self.stop()
        self.n += 1
        self.out = self.log_dir / f"terminal1-{self.n}.out"
        self.err = self.log_dir / f"terminal1-{self.n}.err"
        self.proc = subprocess.Popen(["bash", "-c", cmd], cwd=self.cwd, env=self.env,
                                     stdout=open(self.out, "wb"), stderr=open(self.err, "wb"),
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 60
        while "mongoguard listening on" not in self.err.read_text(errors="replace"):
            assert self.proc.poll() is None, f"{cmd!r} exited {self.proc.returncode}:\n" \
                                             f"{self.err.read_text(errors='replace')[-3000:]}"
            assert time.monotonic() < deadline, f"{cmd!r} did not listen within 60 s"
            time.sleep(0.1)

    def stop(self) -> None:
        """Ctrl-C: SIGINT to the terminal's foreground process group, run.sh's."""
        if not self.proc:
            return
        os.killpg(self.proc.pid, signal.SIGINT)
        rc = self.proc.wait(60)
        self.proc = None
        log = self.out.read_text(errors="replace").splitlines()
        self.lines += log
        # One Ctrl-C drains once: never the second signal's "closing every
        # connection now" (issue 34: the terminal's SIGINT and run.sh's SIGTERM).
        assert not any("Second signal" in l for l in log), "one Ctrl-C was taken as two signals"
        assert any("Shutdown complete" in l for l in log), f"mongoguard did not drain:\n{log[-5:]}"
        assert rc == 130, f"run.sh exited {rc} on Ctrl-C:\n{self.err.read_text()[-2000:]}"

    def new_lines(self) -> list[str]:
        cur = self.lines + (self.out.read_text(errors="replace").splitlines()
                            if self.proc else [])
        fresh, self.seen = cur[self.seen:], len(cur)
        return fresh


def check_block(info: str, body: str, out: list[str], log: list[str], where: str) -> None:
    if info == "json":
        got = findings(log)
        for want in findings(body.splitlines()):
            key = {k: want.get(k) for k in FINDING_KEYS}
            assert any({k: g.get(k) for k in FINDING_KEYS} == key for g in got), \
                f"{where}: no finding like {key}\namong:\n" + \
                "\n".join(json.dumps({k: g.get(k) for k in FINDING_KEYS}) for g in got)
        return
    have = {mask(l) for l in out + log}
    for line in body.splitlines():
        if not line.strip() or line.strip() == "...":
            continue
        assert mask(line) in have, f"{where}: README shows\n  {line}\nbut the output has no " \
                                   f"such line; it was:\n" + "\n".join(out[-60:])


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A directory laid out like a fresh clone after scripts/setup.sh."""
    for name in ("scripts", "configs"):
        (tmp_path / name).symlink_to(ROOT / name)
    build = tmp_path / "build"
    build.mkdir()
    (build / "bin").symlink_to(ROOT / "build" / "bin")
    (build / "mongoguard").symlink_to(mongoguard_binary())
    return tmp_path


def test_readme_walkthroughs_run_as_written(clone: Path, tmp_path_factory):
    assert (ROOT / "build" / "bin" / "mongosh").exists(), "scripts/setup.sh installs build/bin"
    listen, fport = free_port(), free_port()
    env = dict(os.environ, MG_LISTEN=f"127.0.0.1:{listen}", MG_FERRETDB_PORT=str(fport),
               MG_MONGOGUARD=mongoguard_binary(), MG_FERRETDB=ferretdb_binary())
    env.pop("MG_CONFIG", None)
    logs = tmp_path_factory.mktemp("readme-logs")
    rcfile = logs / "status"
    t1 = Terminal1(clone, env, logs)

    def local(cmd: str) -> str:
        return cmd.replace("27018", str(listen)).replace("27117", str(fport))

    blocks = walkthrough_blocks()
    assert sum(info == "sh" for info, _ in blocks) >= 8, "the walkthroughs' blocks were not found"
    ran = 0
    try:
        i = 0
        while i < len(blocks):
            info, body = blocks[i]
            if info != "sh":
                i += 1
                continue
            shown = []
            j = i + 1
            while j < len(blocks) and blocks[j][0] != "sh":
                shown.append(blocks[j])
                j += 1
            blocked = any("MongoServerError" in b for _, b in shown)
            out: list[str] = []
            script: list[str] = []
            expect: list[tuple[str, int]] = []

            def run_terminal2() -> None:
                """The turn's terminal-2 commands so far, in one bash as in a terminal
                ($? carries over); each command's status is noted, $? restored."""
                if not script:
                    return
                rcfile.write_text("")
                r = subprocess.run(["bash", "-c", "\n".join(script)], cwd=clone, env=env,
                                   capture_output=True, text=True, timeout=300)
                out.extend((r.stdout + r.stderr).splitlines())
                rcs = [int(x) for x in rcfile.read_text().split()]
                assert len(rcs) == len(expect), f"the turn stopped early:\n{r.stdout}\n{r.stderr}"
                for (cmd, want), rc in zip(expect, rcs):
                    assert rc == want, f"{cmd!r} exited {rc}, README says {want}:\n" \
                                       f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
                script.clear()
                expect.clear()

            for cmd in commands(body):
                ran += 1
                if cmd == CTRL_C:
                    run_terminal2()
                    t1.stop()
                elif cmd.startswith("scripts/run.sh"):
                    run_terminal2()
                    t1.start(local(cmd))
                else:
                    script.append(f"{local(cmd)}\nrc=$?; echo $rc >>{rcfile}; (exit $rc)")
                    expect.append((cmd, 1 if blocked and "mongosh" in cmd else 0))
            run_terminal2()
            if any(info2 != "sh" for info2, _ in shown):
                time.sleep(0.5)  # the log line of the last request
            log = t1.new_lines()
            for info2, body2 in shown:
                if info2 in ("", "json"):
                    check_block(info2, body2, out, log, f"after README block {body.strip()[:60]!r}")
            i = j
    finally:
        t1.stop()
    assert ran >= 10
