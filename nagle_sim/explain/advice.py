"""The fix advisor: for each stall, which endpoint to change and how, in the user's runtime.

Owns: `RUNTIMES` (each runtime's TCP_NODELAY default and the calls that coalesce writes,
set NODELAY, cork, and set QUICKACK — every row with the source it was read from) and
`advise`, which turns a stall's causes into ordered steps: coalesce the message's writes
first (a buffered writer, writev), then NODELAY, then cork or MSG_MORE around header and
body, and QUICKACK on the peer last (and why it is rarely the fix). Plain data and
strings; must not import rich, textual, simpy or realnet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..model.events import Side
from .causes import WINDOW_CAUSES, Stall


@dataclass(frozen=True, slots=True)
class Source:
    """Where a runtime's default and calls were read: a document or source file, and the
    version read."""

    what: str
    where: str
    version: str

    def text(self) -> str:
        return f"{self.what}: {self.where} ({self.version})"


@dataclass(frozen=True, slots=True)
class Runtime:
    key: str
    name: str
    nagle: str
    """Nagle's state on a new connection, in words ("on: TCP_NODELAY is off by default")."""
    nodelay_default: bool
    coalesce: str
    """The first fix: one write per message (a buffered writer, a gathering write)."""
    nodelay: str
    cork: str
    """Cork or MSG_MORE around header and body, and how to clear it after the last write."""
    quickack: str
    sources: tuple[Source, ...]
    uncork: str = ""
    """The call that clears a cork after a message's last write ("" when the runtime
    cannot cork a socket itself)."""

    def to_json(self) -> dict[str, Any]:
        return {"runtime": self.key, "name": self.name, "nagle": self.nagle,
                "nodelay_default": self.nodelay_default, "coalesce": self.coalesce,
                "nodelay": self.nodelay, "cork": self.cork, "uncork": self.uncork,
                "quickack": self.quickack,
                "sources": [{"what": s.what, "where": s.where, "version": s.version}
                            for s in self.sources]}


TCP7 = Source("TCP_NODELAY, TCP_CORK (its 200 ms ceiling), TCP_QUICKACK",
              "man 7 tcp", "Debian man-pages 6.03")
SEND2 = Source("MSG_MORE", "man 2 send", "Debian man-pages 6.03")

RUNTIMES: dict[str, Runtime] = {r.key: r for r in (
    Runtime(
        "c", "C and the socket API (Linux)",
        "on: a new TCP socket has TCP_NODELAY off", False,
        "build the message in one buffer and send() it once, or writev(fd, iov, 2) / "
        "sendmsg() with header and body as two iovecs: one call, one segment",
        "int one = 1; setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);",
        "setsockopt(fd, IPPROTO_TCP, TCP_CORK, &one, …) before the header and "
        "setsockopt(…, TCP_CORK, &zero, …) after the body; or send(fd, hdr, n, MSG_MORE) "
        "then send(fd, body, m, 0) — never MSG_MORE on the last write",
        "setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one) after every recv()",
        (TCP7, SEND2),
        uncork="int zero = 0; setsockopt(fd, IPPROTO_TCP, TCP_CORK, &zero, sizeof zero);"),
    Runtime(
        "python", "Python (socket module)",
        "on: the socket module sets nothing, the kernel's default stands", False,
        "sock.sendall(header + body), or sock.sendmsg([header, body]) (one gathering "
        "write); with a file object, sock.makefile('wb') and one flush() per message",
        "sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)",
        "sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1) … 0 after the body; or "
        "sock.send(header, socket.MSG_MORE) then sock.send(body)",
        "sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1) after every recv()",
        (Source("socket objects keep the kernel default; setsockopt and sendmsg",
                "docs.python.org/3/library/socket.html", "Python 3.11"), TCP7),
        uncork="sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)"),
    Runtime(
        "python-asyncio", "Python asyncio streams and transports",
        "off: every TCP transport sets TCP_NODELAY when it is created", True,
        "writer.write(header + body) or writer.writelines([header, body]) before one "
        "await writer.drain() (the transport sends what is buffered together)",
        "already on (base_events._set_nodelay on every TCP socket)",
        "sock = writer.get_extra_info('socket') gives the socket for setsockopt "
        "(TCP_CORK); asyncio has no MSG_MORE",
        "writer.get_extra_info('socket').setsockopt(socket.IPPROTO_TCP, "
        "socket.TCP_QUICKACK, 1) after every read",
        (Source("_SelectorSocketTransport.__init__ calls base_events._set_nodelay",
                "Lib/asyncio/selector_events.py, Lib/asyncio/base_events.py",
                "CPython 3.11.7"),),
        uncork="writer.get_extra_info('socket').setsockopt(socket.IPPROTO_TCP, "
        "socket.TCP_CORK, 0)"),
    Runtime(
        "java", "Java (java.net.Socket, java.nio SocketChannel)",
        "on: TCP_NODELAY is FALSE by default", False,
        "new BufferedOutputStream(socket.getOutputStream()), write header and body, then "
        "flush() once; with NIO, channel.write(new ByteBuffer[] {header, body}) (a "
        "gathering write)",
        "socket.setTcpNoDelay(true), or channel.setOption(StandardSocketOptions.TCP_NODELAY, "
        "true)",
        "no TCP_CORK or MSG_MORE in the JDK: buffer the message (above) instead",
        "socket.setOption(jdk.net.ExtendedSocketOptions.TCP_QUICKACK, true) after every "
        "read (Linux)",
        (Source("\"The default value of this socket option is FALSE\" (TCP_NODELAY)",
                "java.base/java/net/StandardSocketOptions.java", "JDK 25.0.3 (src.zip)"),
         Source("TCP_QUICKACK", "jdk.net/jdk/net/ExtendedSocketOptions.java",
                "JDK 25.0.3 (src.zip)"))),
    Runtime(
        "netty", "Netty (Java)",
        "off: DefaultSocketChannelConfig sets TCP_NODELAY when it can", True,
        "write() each part and flush() once per message (writeAndFlush only on the last "
        "part), or a CompositeByteBuf of header and body",
        "already on; bootstrap.childOption(ChannelOption.TCP_NODELAY, true) to be sure",
        "the epoll transport: EpollChannelOption.TCP_CORK",
        "the epoll transport: EpollChannelOption.TCP_QUICKACK",
        (Source("\"Enable TCP_NODELAY by default if possible\"",
                "netty/netty transport/src/main/java/io/netty/channel/socket/"
                "DefaultSocketChannelConfig.java", "4.1, commit e5951d46"),),
        uncork="channel.config().setOption(EpollChannelOption.TCP_CORK, false)"),
    Runtime(
        "node", "Node.js (net.Socket)",
        "on: \"When a TCP connection is created, it will have Nagle's algorithm enabled\"",
        False,
        "socket.write(Buffer.concat([header, body])), or socket.cork(); write header and "
        "body; socket.uncork() (Node's own cork: one writev)",
        "socket.setNoDelay(true), or net.connect({ …, noDelay: true })",
        "no TCP_CORK or MSG_MORE: socket.cork()/uncork() buffer in Node instead",
        "not exposed",
        (Source("socket.setNoDelay(): Nagle enabled on a new connection", "doc/api/net.md",
                "Node.js v20 (PR #31541)"),
         Source("http.createServer noDelay defaults to true (HTTP servers only)",
                "doc/api/http.md", "Node.js v18.0.0 (PR #42163)"))),
    Runtime(
        "go", "Go (net.TCPConn)",
        "off: every TCPConn is created with TCP_NODELAY set", True,
        "bufio.NewWriter(conn) and one Flush() per message, or net.Buffers{header, "
        "body}.WriteTo(conn) (writev)",
        "already on; conn.(*net.TCPConn).SetNoDelay(true) if something turned it off",
        "conn.SyscallConn() then unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_CORK, "
        "1) … 0 after the body",
        "the same through SyscallConn with unix.TCP_QUICKACK after every Read",
        (Source("newTCPConn calls setNoDelay(fd, true); SetNoDelay: \"The default is true "
                "(no delay)\"", "src/net/tcpsock.go", "Go 1.26.8"),),
        uncork="unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_CORK, 0) (through "
        "conn.SyscallConn())"),
    Runtime(
        "rust", "Rust (std::net::TcpStream, tokio::net::TcpStream)",
        "on: std and tokio leave the kernel default", False,
        "std::io::BufWriter::new(&stream), write header and body, flush() once; or "
        "stream.write_vectored(&[IoSlice::new(&header), IoSlice::new(&body)])",
        "stream.set_nodelay(true) (std and tokio alike)",
        "rustix::net::sockopt::set_tcp_cork(&stream, true) … false after the body",
        "std::os::linux::net::TcpStreamExt::set_quickack(true) after every read "
        "(nightly: feature tcp_quickack)",
        (Source("TcpStream::set_nodelay", "std/net/struct.TcpStream.html",
                "Rust 1.95.0 documentation"),
         Source("TcpStreamExt::set_quickack (unstable)", "std::os::linux::net",
                "Rust nightly documentation")),
        uncork="rustix::net::sockopt::set_tcp_cork(&stream, false)"),
    Runtime(
        "dotnet", ".NET (System.Net.Sockets)",
        "on: Socket.NoDelay is false by default (Kestrel sets it true)", False,
        "one socket.Send(IList<ArraySegment<byte>>) with header and body (a gathering "
        "send), or a BufferedStream over the NetworkStream with one Flush()",
        "socket.NoDelay = true (TcpClient.NoDelay = true)",
        "socket.SetSocketOption(SocketOptionLevel.Tcp, (SocketOptionName)3, 1) (TCP_CORK "
        "on Linux)",
        "socket.SetSocketOption(SocketOptionLevel.Tcp, (SocketOptionName)12, 1) "
        "(TCP_QUICKACK on Linux) after every read",
        (Source("Socket.NoDelay: \"The default is false\"",
                "learn.microsoft.com/dotnet/api/system.net.sockets.socket.nodelay",
                ".NET 8"),
         Source("KestrelServerOptions.NoDelay: \"Defaults to true\"",
                "learn.microsoft.com/dotnet/api/"
                "microsoft.aspnetcore.server.kestrel.kestrelserveroptions.nodelay",
                "ASP.NET Core")),
        uncork="socket.SetSocketOption(SocketOptionLevel.Tcp, (SocketOptionName)3, 0)"),
    Runtime(
        "nginx", "nginx",
        "off on keep-alive connections: tcp_nodelay on is the default", True,
        "for upstream responses, keep proxy_buffering on (nginx then writes the buffered "
        "response in large writes)",
        "tcp_nodelay on; (the default)",
        "tcp_nopush on; with sendfile on; corks header and file (TCP_CORK on Linux), "
        "released with the last part",
        "not exposed",
        (Source("defaults tcp_nopush 0, tcp_nodelay 1 (ngx_conf_merge_value)",
                "nginx/nginx src/http/ngx_http_core_module.c", "nginx 1.x source"),)),
    Runtime(
        "haproxy", "HAProxy",
        "off: client and server sockets get TCP_NODELAY; MSG_MORE marks partial sends",
        True,
        "nothing to do in HAProxy: it sends what it has buffered together",
        "already on (src/session.c, src/sock.c)",
        "MSG_MORE while more data follows; option http-no-delay turns that off for "
        "applications that need every chunk at once",
        "not exposed",
        (Source("setsockopt TCP_NODELAY on accepted and outgoing sockets",
                "haproxy/haproxy src/session.c, src/sock.c", "3.5-dev5"),
         Source("option http-no-delay", "haproxy/haproxy doc/configuration.txt",
                "3.5-dev5"))),
    Runtime(
        "grpc", "gRPC (C-core: C++, Python, Ruby, PHP; grpc-go; grpc-java)",
        "off: C-core sets TCP_NODELAY on every socket, grpc-go and grpc-java inherit it "
        "from Go and Netty", True,
        "nothing to do in gRPC: each message is framed and flushed as one write",
        "already on (grpc_set_socket_low_latency(fd, 1))",
        "not exposed",
        "not exposed",
        (Source("grpc_set_socket_low_latency(fd, 1) when a socket is prepared",
                "grpc/grpc src/core/lib/iomgr/tcp_server_utils_posix_common.cc",
                "commit d7728cda"),)),
    Runtime(
        "curl", "curl / libcurl",
        "off: CURLOPT_TCP_NODELAY is 1 by default since 7.50.2", True,
        "nothing to do in libcurl",
        "curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L) (the default)",
        "not exposed",
        "not exposed",
        (Source("CURLOPT_TCP_NODELAY: \"The option is set by default\"",
                "CURLOPT_TCP_NODELAY(3)", "libcurl 7.50.2 and later"),)),
)}
"""Each runtime a user may name with ``--runtime``, in the order `--runtimes` lists."""

DEFAULT_RUNTIME = "c"


def runtime_names() -> list[str]:
    return [*RUNTIMES, "all"]


@dataclass(frozen=True, slots=True)
class Step:
    kind: str
    """"coalesce", "nodelay", "cork", "uncork", "last_write", "quickack", "window",
    "none"."""
    text: str
    why: str

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "text": self.text, "why": self.why}


@dataclass(frozen=True, slots=True)
class Advice:
    side: Side | None
    """The endpoint to change; None when no socket setting would help."""
    runtime: str
    summary: str
    steps: tuple[Step, ...]

    def to_json(self) -> dict[str, Any]:
        return {"side": self.side.value if self.side else None, "runtime": self.runtime,
                "summary": self.summary, "steps": [s.to_json() for s in self.steps]}

    def short(self) -> str:
        """One line: the endpoint and the first change (an annotation's fix)."""
        if self.side is None or not self.steps:
            return self.summary
        return f"{self.side.value}: {self.steps[0].text}"

    def lines(self) -> list[str]:
        return [self.summary] + [f"{i}. {s.text} ({s.why})"
                                 for i, s in enumerate(self.steps, 1)]


QUICKACK_WHY = ("rarely the fix: Linux only, the kernel clears it again after the next "
                "ACK so it must be set after every read, it changes the other endpoint, "
                "and it only hides the wait the writer's split message causes")


def writer(stall: Stall) -> Side | None:
    """The side whose data was held: the first data after the stall is its."""
    if stall.key is not None:
        return Side(stall.key[0])
    return stall.waiting


def advise(stall: Stall, runtime: str = DEFAULT_RUNTIME) -> Advice:
    """Which endpoint to change for ``stall`` and how, in ``runtime`` (a `RUNTIMES` key)."""
    rt = RUNTIMES[runtime]
    causes = set(stall.causes)
    first = stall.causes[0] if stall.causes else ""
    if "nagle" in causes:
        side = writer(stall)
        assert side is not None
        peer = side.peer.value
        steps = [
            Step("coalesce", rt.coalesce,
                 f"the {side.value} wrote one message in several pieces; in one write "
                 "nothing small is left for Nagle to hold"),
            Step("nodelay", rt.nodelay,
                 f"Nagle on the {side.value} ({rt.nagle}); with NODELAY each piece leaves "
                 "at once, one segment each"),
        ]
        if not rt.cork.startswith("not exposed"):
            steps.append(Step("cork", rt.cork,
                              "cork around header and body when the pieces come from "
                              "different code: one segment, released with the last piece"))
        steps.append(Step("quickack", f"on the {peer}: {rt.quickack}", QUICKACK_WHY))
        return Advice(side, runtime, f"change the {side.value}: it wrote a message in "
                      f"pieces and Nagle held the last one for the {peer}'s ACK",
                      tuple(steps))
    if first in ("cork", "msg_more"):
        side = writer(stall)
        assert side is not None
        steps = []
        if first == "cork":
            steps.append(Step("uncork", (f"clear the cork after each message's last write: "
                                         f"{rt.uncork}") if rt.uncork else
                              f"clear the cork after each message's last write ({rt.cork})",
                              "TCP_CORK holds a partial segment until it is cleared or "
                              "the 200 ms probe timer fires"))
        steps.append(Step("last_write", "no MSG_MORE on a message's last write"
                          + ("" if "MSG_MORE" in rt.cork else f" ({rt.cork})"),
                          "MSG_MORE says more is coming: the kernel waits for it"))
        steps.append(Step("coalesce", rt.coalesce,
                          "one write per message needs neither cork nor MSG_MORE"))
        held_by = "MSG_MORE on its last write" if first == "msg_more" else \
            "corked (TCP_CORK or MSG_MORE) after its last write"
        return Advice(side, runtime, f"change the {side.value}: its data waited for the "
                      f"probe timer because it was {held_by}", tuple(steps))
    if causes & set(WINDOW_CAUSES):
        side = writer(stall)
        reader = side.peer if side is not None else stall.waiting
        name = reader.value if reader is not None else "receiver"
        return Advice(reader, runtime, f"change the {name}: its receive window held the "
                      "sender", (Step("window", "read sooner and in larger reads, or give "
                                      "the socket a larger receive buffer (SO_RCVBUF, or "
                                      "leave it to autotuning)",
                                      "the sender waited for window; NODELAY opens none"),))
    if first == "delayed_ack":
        side = stall.waiting
        return Advice(side.peer if side else None, runtime,
                      "a delayed ACK was the last thing in the capture: whether data "
                      "waited for it is not in the capture", ())
    if first == "app":
        side = stall.waiting.peer if stall.waiting else None
        who = side.value if side else "an"
        return Advice(side, runtime, f"not a socket setting: the {who} application itself "
                      "was idle (think time, a slow backend); look at what it waited for",
                      (Step("none", "profile the application around this time",
                            "nothing was queued in TCP"),))
    if first in ("rto", "tlp"):
        return Advice(None, runtime, "not a socket setting: a segment or its ACK was lost "
                      "and the sender's timer resent it; look at the path's losses", ())
    if first in ("cwnd", "pacing"):
        return Advice(None, runtime, "not a socket setting: the sender was limited by its "
                      "congestion window or pacing (bandwidth, not small writes)", ())
    return Advice(None, runtime, "not a socket setting: the time was the link's round "
                  "trip", ())


def runtimes_table() -> list[list[str]]:
    """The `--runtimes` table: runtime, default, NODELAY, coalescing, cork, QUICKACK,
    sources (the same rows as docs/explain.md's table)."""
    return [[rt.key, rt.nagle, rt.nodelay, rt.coalesce, rt.cork, rt.quickack,
             "; ".join(s.text() for s in rt.sources)] for rt in RUNTIMES.values()]
