"""write-write-read client: python3 wwr.py HOST PORT ROUNDS before|coalesce|nodelay"""
import socket
import sys


def main() -> int:
    host, port, rounds, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if mode == "nodelay":
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.connect((host, port))
    head, tail = b"GET /i", b"ndex.ht"
    for _ in range(rounds):
        if mode == "coalesce":
            s.sendmsg([head, tail])        # one gathering write
        else:
            s.send(head)
            s.send(tail)
        got = b""
        while len(got) < 13:
            chunk = s.recv(13 - len(got))
            if not chunk:
                return 2
            got += chunk
    s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
