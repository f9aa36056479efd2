"""SIGUSR1: the log file reopened (log.rotate: reopen, logrotate's create
mode) or renamed then reopened (log.rotate: rename), a line in the new file
saying so, nothing lost; a new capture file."""

from __future__ import annotations

import json
import re
import threading
import time

from fakeserver import FakeServer
from ops_helpers import Mongoguard, wait_until


def text_of(path) -> str:
    """The file's text; "" while it is not there. A rotation renames the log and then opens a
    new one: between the two there is no file by that name, so checking that it exists before
    reading it races with the rename (a fresh clone's run failed on it)."""
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def json_lines(path):
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def pings(g, stop, counter):
    while not stop.is_set():
        g.command({"ping": 1})
        counter[0] += 1


def test_sigusr1_after_mv_reopens_and_loses_nothing(mongoguard_bin, tmp_path):
    srv = FakeServer()
    srv.start()
    log = tmp_path / "mg.log"
    g = Mongoguard(mongoguard_bin, "rotate-reopen", ["--upstream", srv.uri, "--log", str(log)])
    stop, n = threading.Event(), [0]
    t = threading.Thread(target=pings, args=(g, stop, n))
    try:
        g.command({"ping": 1})
        t.start()  # connections open and close throughout the rotation
        time.sleep(0.3)
        log.rename(tmp_path / "mg.log.1")
        time.sleep(0.2)  # lines written now go, whole, to the moved file
        g.signal()
        wait_until(lambda: "Log rotated" in text_of(log), what="new log")
        time.sleep(0.3)
        stop.set()
        t.join()
    finally:
        stop.set()
        assert g.stop() == 0
        srv.stop()
    old, new = json_lines(tmp_path / "mg.log.1"), json_lines(log)
    assert old[0]["msg"] == "mongoguard starting"
    # other threads' lines may follow it in the old file, until the swap
    assert any(ln["msg"] == "Log rotation initiated" for ln in old)
    assert not any(ln["msg"] == "Log rotation initiated" for ln in new)
    rotated = [ln for ln in new if ln["msg"] == "Log rotated"]
    assert rotated and rotated[0]["attr"]["rotate"] == "reopen"
    assert new[-1]["msg"] == "Shutdown complete"
    # every connection ended in one file or the other, each line whole
    ended = [ln for ln in old + new if ln["msg"] == "Connection ended"]
    accepted = [ln for ln in old + new if ln["msg"] == "Connection accepted"]
    assert len(ended) == len(accepted) >= n[0] + 1, (len(ended), len(accepted), n[0])
    assert any(ln["msg"] == "Connection ended" for ln in old)
    assert any(ln["msg"] == "Connection ended" for ln in new)


def test_sigusr1_rename_mode_and_a_new_capture_file(mongoguard_bin, tmp_path):
    srv = FakeServer()
    srv.start()
    log, cap = tmp_path / "mg.log", tmp_path / "capture"
    cap.mkdir()
    g = Mongoguard(mongoguard_bin, "rotate-rename",
                   ["--upstream", srv.uri, "--log", str(log), "--capture", str(cap)],
                   "log: {rotate: rename}\n")
    try:
        g.command({"ping": 1})
        wait_until(lambda: len(list(cap.iterdir())) == 1, what="first capture file")
        g.signal()
        wait_until(lambda: "Log rotated" in text_of(log), what="new log")
        wait_until(lambda: len(list(cap.iterdir())) == 2, what="second capture file")
        g.command({"ping": 1})
    finally:
        assert g.stop() == 0
        srv.stop()
    renamed = [p for p in tmp_path.iterdir() if p.name.startswith("mg.log.")]
    assert len(renamed) == 1, renamed
    assert re.fullmatch(r"mg\.log\.\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d", renamed[0].name)
    old = json_lines(renamed[0])
    msgs = [ln["msg"] for ln in old]
    assert "Log rotation initiated" in msgs
    # another thread's line (the first ping's connection ending) may land
    # after it until the swap, as in the reopen test above: never the
    # rotation's own lines
    after = old[msgs.index("Log rotation initiated") + 1:]
    assert all(ln["c"] == "NETWORK" for ln in after), after
    [line] = [ln for ln in json_lines(log) if ln["msg"] == "Log rotated"]
    assert line["attr"] == {"rotate": "rename", "previous": str(renamed[0])}


def test_sigusr1_with_the_log_on_stdout_is_harmless(mongoguard_bin):
    srv = FakeServer()
    srv.start()
    g = Mongoguard(mongoguard_bin, "rotate-stdout", ["--upstream", srv.uri, "--log", "-"])
    try:
        g.signal()
        wait_until(lambda: "Log not rotated" in g.out_path.read_text(), what="warning")
        assert g.command({"ping": 1})["ok"] == 1
    finally:
        assert g.stop() == 0
        srv.stop()
