"""A write-write-read client and its echo server, as a user's own program would be.

    python3 wwr.py [--rounds N] [--nodelay] [--cork] [--quickack] [--times FILE]

Standard library only and independent of nagle-sim: `nagle-sim watch -- python3 wwr.py`
must explain it from the kernel alone (tests/watch/test_watch_cli.py). The server is a
child process (fork), so watch must follow it. Each round the client sends a 6-byte
header and a 7-byte body with two send() calls and reads the 13-byte answer; --nodelay
sets TCP_NODELAY on the client; --cork sends a 300-byte request with TCP_CORK set and
never cleared; --quickack makes the server set TCP_QUICKACK after every recv(). --times
writes each round's time in ms, one a line (the program's own clock, to hold watch's
account against).
"""

import argparse
import os
import socket
import time


def read(s, n, quickack=False):
    got = b""
    while len(got) < n:
        chunk = s.recv(n - len(got))
        if not chunk:
            raise SystemExit("peer closed")
        if quickack:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
        got += chunk
    return got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--nodelay", action="store_true")
    ap.add_argument("--cork", action="store_true")
    ap.add_argument("--quickack", action="store_true")
    ap.add_argument("--times")
    args = ap.parse_args()
    request = 300 if args.cork else 13
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(1)
    port = lsock.getsockname()[1]
    pid = os.fork()
    if pid == 0:                                   # the server
        s, _ = lsock.accept()
        for _ in range(args.rounds):
            read(s, request, args.quickack)
            s.send(b"r" * 13)
        s.close()
        os._exit(0)
    lsock.close()
    c = socket.create_connection(("127.0.0.1", port))
    if args.nodelay:
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if args.cork:
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
    times = []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        if args.cork:
            c.send(b"c" * 300)
        else:
            c.send(b"h" * 6)
            c.send(b"b" * 7)
        read(c, 13)
        times.append((time.perf_counter() - t0) * 1000)
    c.close()
    os.waitpid(pid, 0)
    if args.times:
        with open(args.times, "w") as f:
            f.write("".join(f"{t:.3f}\n" for t in times))


if __name__ == "__main__":
    main()
