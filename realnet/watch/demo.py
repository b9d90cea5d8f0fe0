"""A write-write-read client and its echo server in one program, over loopback.

    python -m realnet.watch.demo [--rounds N] [--nodelay] [--cork] [--more] [--quickack] [--v6]

The program `python -m realnet.watch --check` watches to tell whether watch works on this
kernel, and the real-kernel tests watch in each variant (tests/watch/test_kernel.py).

The client writes a 6-byte header and a 7-byte body with two send() calls, then reads the
13-byte answer; the server reads 13 bytes and answers with one send(). --nodelay sets
TCP_NODELAY on the client; --quickack makes the server set TCP_QUICKACK after each recv() call;
--cork writes the request corked (TCP_CORK stays set) as one 300-byte send; --more sends
the 300 bytes with MSG_MORE. Prints one line per round: its time in ms (--quiet: nothing).
"""

import argparse
import socket
import threading
import time


def options(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m realnet.watch.demo")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--nodelay", action="store_true")
    ap.add_argument("--cork", action="store_true")
    ap.add_argument("--more", action="store_true")
    ap.add_argument("--quickack", action="store_true")
    ap.add_argument("--v6", action="store_true")
    ap.add_argument("--quiet", action="store_true", help="print nothing")
    return ap.parse_args(argv)


def read(s: socket.socket, n: int, quickack: bool = False) -> bytes:
    got = b""
    while len(got) < n:
        chunk = s.recv(n - len(got))
        if not chunk:
            raise SystemExit("peer closed")
        if quickack:
            # after every recv(): an ACK the kernel is delaying leaves now
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
        got += chunk
    return got


def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    fam, host = (socket.AF_INET6, "::1") if args.v6 else (socket.AF_INET, "127.0.0.1")
    request = 300 if (args.cork or args.more) else 13
    lsock = socket.socket(fam, socket.SOCK_STREAM)
    lsock.bind((host, 0))
    lsock.listen(1)

    def server() -> None:
        s, _ = lsock.accept()
        for _ in range(args.rounds):
            read(s, request, args.quickack)
            s.send(b"r" * 13)
        s.close()

    t = threading.Thread(target=server)
    t.start()
    c = socket.socket(fam, socket.SOCK_STREAM)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1 if args.nodelay else 0)
    if args.cork:
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
    c.connect(lsock.getsockname()[:2])
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        if args.cork:
            c.send(b"c" * 300)
        elif args.more:
            c.send(b"m" * 300, socket.MSG_MORE)
        else:
            c.send(b"h" * 6)
            c.send(b"b" * 7)
        read(c, 13)
        if not args.quiet:
            print(f"{(time.perf_counter() - t0) * 1000:.1f}", flush=True)
    c.close()
    t.join()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
