"""Each message corked and uncorked (lesson 12's client): python3 cork_each.py HOST PORT N

For each of N messages: TCP_CORK on, fifteen 2-byte send() calls, TCP_CORK off (the
30 bytes leave inside that setsockopt), then read the 2-byte reply. Standard library only.
The raw records of one run against a NODELAY server (read 30, answer 2) are
tests/watch/fixtures/cork_each.jsonl: ``nagle-sim watch --port P --record FILE`` while it
ran, 5 messages.
"""

import socket
import sys


def main() -> int:
    host, port, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    s = socket.create_connection((host, port))
    for _ in range(rounds):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
        for _ in range(15):
            s.send(b"ab")
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)
        got = b""
        while len(got) < 2:
            chunk = s.recv(2 - len(got))
            if not chunk:
                return 2
            got += chunk
    s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
