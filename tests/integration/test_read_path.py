"""mongoguard reads plain sockets itself (session.c, plain_read_cb), not
through libevent 2.1's bufferevent read, which asks ioctl(FIONREAD) before
every read and reads 4 KiB at a time. If the own read path stopped being
used (a libevent whose bufferevent no longer looks as own_reads() expects,
say), everything would still work, only slower: this test is what notices.
It runs mongoguard under strace and counts the system calls of real
traffic, small requests and a large one both ways."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time

import pytest
from pymongo import MongoClient

from conftest import LOG_DIR, free_port, wait_port


def test_plain_sockets_are_read_without_fionread(mongoguard_bin, upstream, dbname):
    if not shutil.which("strace"):
        pytest.fail("strace is not installed (scripts/setup.sh --tests installs it)",
                    pytrace=False)
    port = free_port()
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    trace = LOG_DIR / f"read-path-{port}.strace"
    proc = subprocess.Popen(
        ["strace", "-f", "-qq", "-e", "trace=ioctl,recvfrom,readv,read,connect,accept,accept4", "-o", str(trace),
         mongoguard_bin, "--listen", f"127.0.0.1:{port}", "--upstream", upstream.uri,
         "--log", str(LOG_DIR / f"read-path-{port}.log"), "--workers", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_port(port, 30, proc, "mongoguard under strace")
        n_small = 200
        big = "x" * (1024 * 1024)
        with MongoClient(f"mongodb://127.0.0.1:{port}/", serverSelectionTimeoutMS=10000,
                         directConnection=True) as c:
            coll = c[dbname].c
            coll.insert_one({"_id": 0, "v": 0})
            for _ in range(n_small):
                assert coll.find_one({"_id": 0}) == {"_id": 0, "v": 0}
            coll.insert_one({"_id": 1, "big": big})
            assert len(coll.find_one({"_id": 1})["big"]) == len(big)
    finally:
        # SIGTERM to mongoguard itself (strace's child), then strace ends
        children = open(f"/proc/{proc.pid}/task/{proc.pid}/children").read().split()
        for pid in children:
            subprocess.run(["kill", "-TERM", pid])
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    time.sleep(0.1)
    lines = trace.read_text().splitlines()
    fionread = [ln for ln in lines if "FIONREAD" in ln]
    recvs = [ln for ln in lines if re.search(r"\brecvfrom\(\d+, .*\) = \d+$", ln)]
    readvs = [ln for ln in lines if re.search(r"\breadv\(\d+, .*\) = (\d+)$", ln)]

    def large(calls):
        return [ln for ln in calls if int(re.search(r"= (\d+)$", ln).group(1)) > 16384]

    # which socket each large read was on, as it was at the time: descriptors
    # are reused (the start-up check's and the side connection's, clients')
    up_port = int(upstream.uri.rstrip("/").rsplit(":", 1)[1])
    kind, up_fds, big_up, big_client = {}, set(), [], []
    for ln in lines:
        if m := re.search(r"\bconnect\((\d+), .*htons\((\d+)\)", ln):
            kind[m.group(1)] = "upstream" if int(m.group(2)) == up_port else "other"
            if kind[m.group(1)] == "upstream":
                up_fds.add(m.group(1))
        elif m := re.search(r"\baccept4? resumed>.*= (\d+)$|\baccept4?\(.*\) = (\d+)$", ln):
            kind[m.group(1) or m.group(2)] = "client"
        elif (m := re.search(r"\b(recvfrom|readv)\((\d+), .*\) = (\d+)$", ln)) and \
                int(m.group(3)) > 16384:
            side = kind.get(m.group(2))
            if side == "upstream":
                big_up.append(ln)
            elif side == "client" and m.group(1) == "recvfrom":
                big_client.append(ln)
    big_recvs, big_readvs = large(recvs), large(readvs)
    print(f"  {len(lines)} traced calls: {len(recvs)} recvfrom ({len(big_recvs)} of more "
          f"than 16 KiB), {len(readvs)} readv ({len(big_readvs)} of more than 16 KiB), "
          f"{len(fionread)} FIONREAD; of more than 16 KiB: {len(big_client)} recvfrom from "
          f"clients, {len(big_up)} reads from the upstream")
    assert not fionread, f"libevent's read path is back: {fionread[:3]}"
    # every request and every reply is read with a recv: two per round trip
    assert len(recvs) >= 2 * n_small, f"only {len(recvs)} recvfrom calls for {n_small} finds"
    # the 1 MiB insert is cut through (no rule can block it): read in large
    # recvs straight into the buffer it is judged and forwarded from
    assert big_client, ("no large recvfrom from the client: the 1 MiB insert was not read "
                        "straight into its own buffer")
    # its 1 MiB read-back streams through the input buffer in large reads (after
    # a full 16 KiB first read, a recv into the same chain, or a readv when
    # 16 KiB of it already wait)
    assert up_fds, "no connect to the upstream traced"
    assert big_up, "no large read from the upstream: the 1 MiB reply was read 16 KiB at a time"
