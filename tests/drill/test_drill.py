"""`nagle-sim drill`: packetdrill's language parsed, played against the model, and the
command's exit codes. The .pkt scripts beside this file were written for this project
(not copied) and were also checked against this machine's kernel with packetdrill."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nagle_sim.drill import DrillSyntaxError, Status, parse, run_script
from nagle_sim.drill.script import Ellipsis_, Int, List, Packet, Struct, Syscall, TimeKind, Word

HERE = Path(__file__).parent
SCRIPTS = sorted(HERE.glob("*.pkt"))

HANDSHAKE = """
    0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3
   +0 bind(3, ..., ...) = 0
   +0 listen(3, 1) = 0
   +0 < S 0:0(0) win 65535 <mss 1000,nop,wscale 7>
   +0 > S. 0:0(0) ack 1 <...>
 +.01 < . 1:1(0) ack 1 win 512
   +0 accept(3, ..., ...) = 4
"""


def play(body: str, **kw: object):  # noqa: ANN201
    return run_script(parse(HANDSHAKE + body, "t.pkt"), **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------- our scripts
KERNEL_STRICT_FAILS = {"burst_merged.pkt": (18, "payload expected 10000 bytes, the model "
                                                  "sent 2000"),
                       "notsent_lowat.pkt": (26, "payload expected 10000 bytes, the model "
                                                 "sent 2000"),
                       "poll_writable.pkt": (24, "payload expected 10000 bytes, the model "
                                                 "sent 2000")}
"""Our scripts that packetdrill fails on this kernel (6.18) with --strict_segments, at this
line: "live packet payload: expected 10000 bytes vs actual 2000 bytes" (the kernel's TSO
skbs hold two segments; packetdrill merges them only without the flag). All the others
pass there in both modes (run as root, each in its own network namespace, November 2026)."""


@pytest.mark.parametrize("path", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_script_passes_on_the_model(path: Path) -> None:
    from nagle_sim.drill import load

    result = run_script(load(path))
    assert result.status is Status.PASS, result.one_line()
    assert result.checked >= 1


@pytest.mark.parametrize("path", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_script_with_strict_segments_does_as_the_kernel_did(path: Path) -> None:
    from nagle_sim.drill import load

    result = run_script(load(path), strict_segments=True)
    if path.name in KERNEL_STRICT_FAILS:
        line, message = KERNEL_STRICT_FAILS[path.name]
        assert result.status is Status.FAIL and result.line == line, result.one_line()
        assert message in result.message
    else:
        assert result.status is Status.PASS, result.one_line()


# ---------------------------------------------------------------- parsing
def test_times_of_every_kind() -> None:
    s = parse("0.1 close(3) = 0\n+.05 close(3) = 0\n* > . 1:1(0) ack 1\n"
              "0.2~0.25 > . 1:1(0)\n+.2~+.3 > . 1:1(0)\n+0...0.1 read(4, ..., 10) = 10\n")
    kinds = [(e.time.kind, e.time.start_us, e.time.end_us) for e in s.events]
    assert kinds == [(TimeKind.ABSOLUTE, 100_000, None), (TimeKind.RELATIVE, 50_000, None),
                     (TimeKind.ANY, 0, None), (TimeKind.ABSOLUTE_RANGE, 200_000, 250_000),
                     (TimeKind.RELATIVE_RANGE, 200_000, 300_000),
                     (TimeKind.RELATIVE, 0, None)]
    read = s.events[-1].action
    assert isinstance(read, Syscall) and read.end_time is not None
    assert read.end_time.start_us == 100_000


def test_packets_with_flags_ack_window_and_options() -> None:
    s = parse("0 < S. 0:0(0) ack 1 win 5792 <mss 1460,nop,wscale 2,sackOK,TS val 1 ecr 0>\n"
              "+0 > P. 1:101(100) ack 1 <...>\n+0 > - 1:1(0)\n+0 > R 2:2(0)\n")
    syn, data, none, rst = (e.action for e in s.events)
    assert isinstance(syn, Packet) and syn.inbound and syn.flags == "S." and syn.ack == 1
    assert syn.window == 5792
    assert [(o.kind, o.values) for o in syn.options or ()] == [
        ("mss", (1460,)), ("nop", ()), ("wscale", (2,)), ("sackOK", ()), ("TS", (1, 0))]
    assert isinstance(data, Packet) and not data.inbound and data.options is None
    assert (data.seq, data.end_seq, data.length) == (1, 101, 100)
    assert isinstance(none, Packet) and none.flags == ""
    assert isinstance(rst, Packet) and rst.flags == "R"


def test_syscall_arguments_lists_structures_and_errno() -> None:
    s = parse("0 sendmsg(4, {msg_name(...)=..., msg_iov(2)=[{..., 40}, {..., 60}], "
              "msg_flags=0}, MSG_MORE|MSG_DONTWAIT) = 100\n"
              "+0 connect(3, ..., ...) = -1 EINPROGRESS (Operation now in progress)\n"
              "+0 fcntl(3, F_GETFL) = 0x2 (flags O_RDWR)\n")
    send, conn, fcntl = (e.action for e in s.events)
    assert isinstance(send, Syscall) and send.name == "sendmsg"
    msg = send.args[1]
    assert isinstance(msg, Struct) and [k for k, _ in msg.fields] == [
        "msg_name", "msg_iov", "msg_flags"]
    iov = msg.fields[1][1]
    assert isinstance(iov, List) and len(iov.items) == 2
    assert send.args[2] == Word(("MSG_MORE", "MSG_DONTWAIT"))
    assert send.result == Int(100)
    assert isinstance(conn, Syscall) and conn.result == Int(-1) and conn.errno == "EINPROGRESS"
    assert isinstance(conn.args[1], Ellipsis_)
    assert isinstance(fcntl, Syscall) and fcntl.result == Int(2)


def test_header_options_init_commands_and_comments() -> None:
    s = parse("// a comment\n--tolerance_usecs=10000\n`sysctl -q net.ipv4.tcp_autocorking=0`\n"
              "/* block\ncomment */ 0 close(3) = 0  // trailing\n")
    assert s.options == {"tolerance_usecs": "10000"}
    assert [c.text for c in s.init_commands] == ["sysctl -q net.ipv4.tcp_autocorking=0"]
    assert len(s.events) == 1 and s.events[0].line == 5


@pytest.mark.parametrize("text, message", [
    ("0 < S 0:1(0)\n", "t.pkt:1: inconsistent sequence numbers"),
    ("0 close(3) = 0\n+0 frobnicate\n", "t.pkt:2: expected '\\(' after frobnicate"),
    ("\n\n+.1~+.05 > . 1:1(0)\n", "t.pkt:3: time range is backwards"),
    ("* close(3) = 0\n", "t.pkt:1: '\\*' and time ranges are for outbound packets only"),
    ("0 < Q 0:0(0)\n", "unknown TCP flags 'Q'"),
    ("0 > . 1:1(0) ack\n", "expected an ACK number"),
    ("0 close(3) = 0 extra\n", "t.pkt:1: unexpected 'extra'"),
    ("99999 close(3) = 0\n", "beyond 3600 s"),
    ("0 write(3, " + "[" * 40 + "]" * 40 + ", 1) = 1\n", "nested deeper than 32"),
    ("0 < udp 0:0(0)\n", "t.pkt:1: udp packets are outside a TCP model"),
    ("0 > S. 0:0(0) <mss 1460\n", "expected '>' closing the TCP options"),
    ("0 close(3 = 0\n", "expected '\\)' closing close"),
    ("0 \x00\n", "unexpected text"),
])
def test_syntax_errors_are_one_line_with_file_and_line(text: str, message: str) -> None:
    with pytest.raises(DrillSyntaxError, match=message) as info:
        parse(text, "t.pkt")
    assert "\n" not in str(info.value)


def test_input_is_bounded() -> None:
    with pytest.raises(DrillSyntaxError, match="larger than 1024 KiB"):
        parse("// x\n" * 300_000)


# single characters, and whole tokens a character-level search would rarely build: code
# blocks with arithmetic (division by zero, deep nesting), blocking-call ellipses, calls
_PIECES = [*"0123456789.+*~<>SPF.:()[]{},=-|/ \n`%abk", "ack", "win", "mss", "TS", "%{", "}%",
           " assert ", "tcpi_snd_cwnd", " / 0", "...", "read(4, ..., ", "write(4, ..., ",
           "+0 ", "\n+.1 ", "0 < S 0:0(0) win 65535\n", "// c\n", "/* c */"]


@given(st.lists(st.sampled_from(_PIECES), max_size=80).map("".join))
def test_any_text_parses_or_fails_with_one_line(text: str) -> None:
    try:
        script = parse(text, "f.pkt")
    except DrillSyntaxError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("f.pkt")
        return
    result = run_script(script)          # whatever it is, playing it never raises
    assert result.status in Status


_ATOMS = st.sampled_from(["0", "1", "0.0", "1e308", "-1", "tcpi_snd_cwnd", "tcpi_rtt",
                          "TCP_CLOSED", "tcpi_unacked"])
_EXPRS = st.recursive(_ATOMS, lambda inner: st.one_of(
    st.tuples(inner, st.sampled_from([" + ", " - ", " * ", " / ", " // ", " % ", " ** ",
                                       " < ", " == ", " and ", " or "]), inner).map(
        lambda t: f"({t[0]}{t[1]}{t[2]})"),
    inner.map(lambda e: f"not {e}"), inner.map(lambda e: f"-{e}")), max_leaves=12)


@given(_EXPRS)
def test_any_code_block_is_a_result_never_an_exception(expr: str) -> None:
    """Whatever follows ``assert``, playing it gives a one-line result."""
    text = HANDSHAKE + f"   +0 %{{ assert {expr} }}%\n"
    try:
        script = parse(text, "c.pkt")
    except DrillSyntaxError as exc:
        assert "\n" not in str(exc)
        return
    result = run_script(script)
    assert result.status in Status and "\n" not in result.one_line()


@given(st.data())
def test_our_scripts_with_a_line_dropped_never_crash(data: st.DataObject) -> None:
    path = data.draw(st.sampled_from(SCRIPTS))
    lines = path.read_text().splitlines()
    drop = data.draw(st.integers(0, len(lines) - 1))
    text = "\n".join(lines[:drop] + lines[drop + 1:])
    try:
        script = parse(text, path.name)
    except DrillSyntaxError:
        return
    assert run_script(script).status in Status


# ---------------------------------------------------------------- playing
def test_a_wrong_sequence_number_fails_at_its_line() -> None:
    r = play("   +0 write(4, ..., 100) = 100\n   +0 > P. 2:102(100) ack 1\n")
    assert r.status is Status.FAIL and r.line == 10
    assert "seq expected 2, got 1" in r.message and "P. 1:101(100) ack 1" in r.message


def test_a_packet_outside_the_tolerance_is_a_timing_failure() -> None:
    """Nagle holds the second write until the ACK; expecting it 10 ms after the ACK fails
    on timing, naming when the model sent it. packetdrill on the kernel: "timing error:
    expected outbound packet at 0.071766 sec but happened at 0.061756 sec"."""
    r = play("   +0 write(4, ..., 10) = 10\n   +0 > P. 1:11(10) ack 1\n"
             "+.001 write(4, ..., 10) = 10\n+.05 < . 1:1(0) ack 11 win 512\n"
             "+.01 > P. 11:21(10) ack 1\n")
    assert r.status is Status.FAIL and r.line == 13
    assert r.message == ("timing: expected P. 11:21(10) ack 1 at 0.071 s (tolerance 0.004 s), "
                         "the model sent P. 11:21(10) ack 1 at 0.061 s")


def test_the_next_packet_is_checked_however_late_it_comes() -> None:
    """Expecting the Nagle-held write at once while its ACK never comes: packetdrill
    waits (up to 2 s) and checks the next packet, the retransmission of the first by the
    RTO (no tail loss probe: the peer did not offer SACK). packetdrill on the kernel:
    "tcp_seq: expected: 11 vs actual: 1", that packet at 0.2238 s."""
    r = play("   +0 write(4, ..., 10) = 10\n   +0 > P. 1:11(10) ack 1\n"
             "+.001 write(4, ..., 10) = 10\n   +0 > P. 11:21(10) ack 1\n"
             "+.05 < . 1:1(0) ack 11 win 512\n")
    assert r.status is Status.FAIL and r.line == 12
    assert r.message == "seq expected 11, got 1 (the model sent P. 1:11(10) ack 1 at 0.226 s)"


def test_a_packet_never_sent_times_out_as_packetdrills_sniffer_does() -> None:
    """Nothing more is ever sent after the ACK: packetdrill gives up waiting 2 s (plus the
    whole seconds of the line's own delay) after it started to look."""
    r = play("   +0 write(4, ..., 10) = 10\n   +0 > P. 1:11(10) ack 1\n"
             "+.01 < . 1:1(0) ack 11 win 512\n  +1.5 > P. 11:21(10) ack 1\n")
    assert r.status is Status.FAIL and r.line == 12
    assert r.message == ("expected P. 11:21(10) ack 1 at 1.52 s, but the model sent nothing "
                         "by 3.02 s (timed out waiting for a packet)")


def test_tolerance_can_be_widened_from_the_command_line() -> None:
    body = ("   +0 write(4, ..., 10) = 10\n   +0 > P. 1:11(10) ack 1\n"
            "+.001 write(4, ..., 10) = 10\n+.05 < . 1:1(0) ack 11 win 512\n"
            "+.01 > P. 11:21(10) ack 1\n")
    assert play(body).status is Status.FAIL        # sent at +0, expected 10 ms later
    assert play(body, tolerance_us=20_000).status is Status.PASS


def test_getsockopt_is_checked() -> None:
    r = play("   +0 getsockopt(4, SOL_TCP, TCP_NODELAY, [1], [4]) = 0\n")
    assert r.status is Status.FAIL and "expected [1], the model returned [0]" in r.message


@pytest.mark.parametrize("body, reason", [
    ("   +0 ioctl(4, SIOCINQ, [0]) = 0\n", "ioctl() is not modelled"),
    ("   +0 send(4, ..., 10, MSG_OOB) = 10\n", "MSG_OOB is not modelled"),
    ("   +0 < . 1:1(0) ack 1 win 512 <sack 1:2>\n", "SACK blocks"),
    ("   +0 < [ect0] . 1:1(0) ack 1\n", "IP header fields"),
    ("   +0 setsockopt(4, SOL_SOCKET, SO_ZEROCOPY, [1], 4) = 0\n", "SO_ZEROCOPY"),
    ("   +0 %{ assert tcpi_bogus == 1 }%\n", "tcpi_bogus is not modelled"),
    ("   +0 %{ import os }%\n", "outside the supported subset"),
    ("   +0 `sysctl -q net.ipv4.tcp_autocorking=0`\n", "in the middle of a script"),
])
def test_what_the_model_cannot_play_is_unsupported_with_the_reason(body: str,
                                                                   reason: str) -> None:
    r = play(body)
    assert r.status is Status.UNSUPPORTED, r.one_line()
    assert reason in r.message


def test_an_expected_error_is_checked() -> None:
    """A call the script expects to fail must fail with that errno (packetdrill compares
    the result and errno); a call that fails unexpectedly fails the script."""
    ok = play("   +0 shutdown(4, SHUT_WR) = 0\n   +0 > F. 1:1(0) ack 1\n"
              "   +0 write(4, ..., 10) = -1 EPIPE (Broken pipe)\n")
    assert ok.status is Status.PASS, ok.one_line()
    wrong = play("   +0 write(4, ..., 10) = -1 EPIPE (Broken pipe)\n")
    assert wrong.status is Status.FAIL and "expected -1 EPIPE" in wrong.message
    surprise = play("   +0 shutdown(4, SHUT_WR) = 0\n   +0 write(4, ..., 10) = 10\n")
    assert surprise.status is Status.FAIL and "failed with EPIPE" in surprise.message


def test_code_blocks_assert_over_tcp_info() -> None:
    """The initial window is 10 segments; the MSS is the peer's 1000; after the handshake
    the connection is ESTABLISHED (state 1)."""
    ok = play("   +0 %{ assert tcpi_snd_cwnd == 10 and tcpi_snd_mss == 1000 }%\n"
              "   +0 %{ assert tcpi_state == TCP_ESTABLISHED, tcpi_state }%\n")
    assert ok.status is Status.PASS, ok.one_line()
    bad = play("   +0 %{ assert 5 <= tcpi_snd_cwnd < 10 }%\n")
    assert bad.status is Status.FAIL and bad.line == 9
    assert "tcpi_snd_cwnd=10" in bad.message


def test_a_blocking_read_waits_for_data() -> None:
    r = play("   +0...0.05 read(4, ..., 100) = 100\n+.05 < P. 1:101(100) ack 1 win 512\n"
             "   +0 > . 1:1(0) ack 101\n")
    assert r.status is Status.PASS, r.one_line()
    r = play("   +0...0.01 read(4, ..., 100) = 100\n+.05 < P. 1:101(100) ack 1 win 512\n")
    assert r.status is Status.FAIL and "expected at" in r.message


# ---------------------------------------------------------------- the command
def _drill(*args: str, timeout: float = 120,
           columns: int = 80) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nagle_sim", "drill", *args],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "COLUMNS": str(columns)})


def test_cli_exit_codes(tmp_path: Path) -> None:
    ok = _drill(str(SCRIPTS[0]))
    assert ok.returncode == 0 and "pass" in ok.stdout
    bad = tmp_path / "bad.pkt"
    bad.write_text(HANDSHAKE + "   +0 write(4, ..., 10) = 10\n   +0 > P. 5:15(10) ack 1\n")
    fail = _drill(str(bad))
    assert fail.returncode == 1 and "bad.pkt:10: fail: seq expected 5" in fail.stderr
    unsupported = tmp_path / "u.pkt"
    unsupported.write_text(HANDSHAKE + "   +0 ioctl(4, SIOCINQ, [0]) = 0\n")
    assert _drill(str(unsupported)).returncode == 2
    icmp = tmp_path / "icmp.pkt"
    icmp.write_text("0 < icmp unreachable\n")
    proc = _drill(str(icmp))
    assert proc.returncode == 2 and "unsupported: icmp packets" in proc.stderr
    for args in ([str(tmp_path / "missing.pkt")], ["/etc"], [str(tmp_path / "x")]):
        proc = _drill(*args)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_cli_directory_table() -> None:
    proc = _drill(str(HERE))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{len(SCRIPTS)} pass" in proc.stdout


# ---------------------------------------------------------------- bounds
@pytest.mark.parametrize("body, status, reason", [
    ("   +0 write(4, ..., 9999999999999999999) = 9999999999999999999\n", Status.ERROR,
     "not between 0 and 2,147,483,647"),
    ("   +0 write(4, ..., 2000000000) = 2000000000\n", Status.UNSUPPORTED,
     "at most 1,000,000,000 bytes per call"),
    ("   +0 writev(4, [{..., 2000000000}, {..., 2000000000}], 2) = 4000000000\n",
     Status.ERROR, "not between 0"),
    ("   +0 read(4, ..., 4294967296) = 0\n", Status.ERROR, "not between 0"),
    ("   +0 write(4, ..., -5) = -5\n", Status.ERROR, "not between 0"),
])
def test_byte_counts_are_bounded(body: str, status: Status, reason: str) -> None:
    """A count the model would need seconds to play is refused before it starts."""
    r = play(body)
    assert r.status is status, r.one_line()
    assert reason in r.message and r.line == 9


def test_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.pkt"
    os.mkfifo(fifo)
    proc = _drill(str(fifo), timeout=20)
    assert proc.returncode == 2, proc.stderr
    assert "not a regular file" in proc.stderr and "Traceback" not in proc.stderr


# ---------------------------------------------------------------- code blocks
@pytest.mark.parametrize("code, reason", [
    ("assert tcpi_snd_cwnd / 0 == 1", "ZeroDivisionError"),
    ("assert tcpi_snd_cwnd % 0 == 1", "ZeroDivisionError"),
    ("assert 1e308 * 10 // 0.0 == 1", "ZeroDivisionError"),
    ("assert " + "-" * 5000 + "1 == 1", "characters (limit 4,096)"),
    # 3,500 unary minuses: CPython 3.11 builds the AST within the recursion budget left
    # by the caller's stack, so whether ast.parse itself refuses it (RecursionError) or
    # our depth check does depends on how deep the test runner's stack is; either is
    # the one clear line this test is about
    ("assert " + "-" * 3500 + "1 == 1", "nested "),
    ("assert " + "-" * 1500 + "1 == 1", "nested more than 64 deep"),
    ("assert " + "*".join(["1"] * 2000) + " > 0", "nested more than 64 deep"),
], ids=["div", "mod", "floordiv-float", "long", "parse-depth", "unary-depth", "product"])
def test_code_block_arithmetic_and_size_errors_are_one_line(code: str, reason: str) -> None:
    r = play(f"   +0 %{{ {code} }}%\n")
    assert r.status is Status.ERROR, r.one_line()
    assert reason in r.message and r.line == 9 and "\n" not in r.one_line()


def test_one_broken_script_never_ends_a_directory_table(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A bug in the runner (here: a KeyError forced on one script) is that script's error
    row, with the exception's type; the other scripts still run."""
    from nagle_sim.cli import drill as cli

    for name in ("a.pkt", "b.pkt"):
        (tmp_path / name).write_text(HANDSHAKE)
    real = cli.run_script

    def flaky(script, **kw):  # noqa: ANN001, ANN003, ANN202
        if script.path.endswith("a.pkt"):
            raise KeyError("boom")
        return real(script, **kw)

    monkeypatch.setattr(cli, "run_script", flaky)
    args = argparse.Namespace(script=str(tmp_path), profile="linux", tolerance_usecs=None,
                              tolerance_percent=None, verbose=False, strict_segments=False)
    assert cli.cmd_drill(args) == 2
    out = capsys.readouterr().out
    assert "KeyError" in out and "1 pass" in out and "1 error" in out
    assert "Traceback" not in out


# ---------------------------------------------------------------- reads
DATA_IN = "+.01 < P. 1:101(100) ack 1 win 512\n   +0 > . 1:1(0) ack 101\n"


@pytest.mark.parametrize("call", [
    "recvmsg(4, {msg_name(...)=..., msg_iov(1)=[{..., 60}], msg_flags=0}, 0) = 60",
    "readv(4, [{..., 20}, {..., 40}], 2) = 60",
    "recv(4, ..., 60, 0) = 60",
])
def test_reads_take_the_size_from_the_buffer_argument(call: str) -> None:
    """The iovec sum is the size (recvmsg's third argument is its flags, readv's the
    iovec count): 60 of the 100 bytes that arrived are read, then the other 40."""
    r = play(DATA_IN + f"   +0 {call}\n   +0 read(4, ..., 1000) = 40\n")
    assert r.status is Status.PASS, r.one_line()


def test_a_read_flag_the_model_cannot_honour_is_unsupported() -> None:
    r = play(DATA_IN + "   +0 recv(4, ..., 100, MSG_PEEK) = 100\n")
    assert r.status is Status.UNSUPPORTED and "MSG_PEEK" in r.message


# ---------------------------------------------------------------- timing (run.c)
# The handshake ends at 0.01 s with a 10 ms RTT, so 40 bytes sent with MSG_MORE at 0.01 s
# leave by the probe timer (the RTO) at 0.226 s.
PROBE = "   +0 send(4, ..., 40, MSG_MORE) = 40\n"


@pytest.mark.parametrize("expect, ok", [
    ("+.2~+.205", True),       # 0.21~0.215 s, tolerance 12.5 % of 0.2 s: 0.226 s is inside
    ("0.21~0.215", True),
    ("+.1~+.15", False),       # ends at 0.16 + 12.5 ms
    ("+.3~+.4", False),        # starts at 0.31 - 37.5 ms: the model's 0.226 s is early
    ("*", True),
])
def test_outbound_ranges_take_tolerance_from_their_start(expect: str, ok: bool) -> None:
    r = play(PROBE + f"{expect} > P. 1:41(40) ack 1\n")
    assert (r.status is Status.PASS) is ok, r.one_line()


def test_consecutive_inbound_packets_are_anchored_to_script_times() -> None:
    """The outbound packet is 16 ms late (inside its 25 ms tolerance), so the inbound ACK
    written for 0.2245 s happens at 0.226 s (1.5 ms late, inside 1.8 ms). The next inbound
    packet, 3 ms later in the script, counts from 0.2245 s, not from 0.226 s: it arrives at
    0.2275 s and is ACKed then, which a 1 ms tolerance tells apart from 0.229 s."""
    body = (PROBE + "+.2 > P. 1:41(40) ack 1\n0.2245 < . 1:1(0) ack 41 win 512\n"
            "+.003 < P. 1:11(10) ack 41 win 512\n")
    r = play(body + "0.2275 > . 41:41(0) ack 11\n", tolerance_us=1000)
    assert r.status is Status.PASS, r.one_line()
    r = play(body + "0.229 > . 41:41(0) ack 11\n", tolerance_us=1000)
    assert r.status is Status.FAIL and "ack 11 at 0.2275 s" in r.message, r.one_line()


@pytest.mark.parametrize("late", [
    "0.215 < . 1:1(0) ack 41 win 512",
    "0.215 write(4, ..., 10) = 10",
    "0.215 %{ assert tcpi_snd_cwnd > 0 }%",
])
def test_an_event_whose_time_has_passed_fails(late: str) -> None:
    """packetdrill's check_event_time: the outbound packet expected at 0.21 s left at
    0.226 s (inside its tolerance), so an event written for 0.215 s (tolerance 4 ms)
    happens 11 ms late; one written for 0.224 s is 2 ms late, inside."""
    r = play(PROBE + "+.2 > P. 1:41(40) ack 1\n" + late + "\n")
    assert r.status is Status.FAIL and r.line == 11, r.one_line()
    assert "at 0.215 s, but it happened at 0.226 s" in r.message
    ok = play(PROBE + "+.2 > P. 1:41(40) ack 1\n" + late.replace("0.215", "0.224") + "\n")
    assert ok.status is Status.PASS, ok.one_line()


def test_a_blocking_calls_end_tolerance_counts_from_its_own_start() -> None:
    """The read starts at 0.01 s and should return at 0.51 s: tolerance 12.5 % of 0.5 s.
    Data at 0.56 s is 50 ms late, inside it, however close the event before it."""
    body = ("   +0...0.5 read(4, ..., 10) = 10\n+.49 < . 1:1(0) ack 1 win 512\n"
            "{} < P. 1:11(10) ack 1 win 512\n")
    assert play(body.format("+.06")).status is Status.PASS
    r = play(body.format("+.07"))        # 60 ms late: outside 62.5 ms? no: 0.57 vs 0.51
    assert r.status is Status.PASS, r.one_line()
    r = play(body.format("+.08"))        # 70 ms late: outside
    assert r.status is Status.FAIL and "returned at 0.58 s, expected at 0.51 s" in r.message


@pytest.mark.parametrize("body, message", [
    ("   +0 read(4, ..., 10) = 10\n", "read() would block (no data yet)"),
    ("   +0 recv(4, ..., 10, 0) = 10\n", "recv() would block"),
])
def test_a_call_that_would_block_without_an_end_time_fails(body: str, message: str) -> None:
    r = play(body)
    assert r.status is Status.FAIL and message in r.message and r.line == 9
    nonblocking = play(body.replace("= 10", "= -1 EAGAIN (Resource temporarily unavailable)"))
    assert nonblocking.status is Status.PASS, nonblocking.one_line()


def test_a_blocking_accept_before_the_handshake_would_block() -> None:
    r = run_script(parse("0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3\n+0 bind(3, ..., ...) = 0\n"
                         "+0 listen(3, 1) = 0\n+0 accept(3, ..., ...) = 4\n", "t.pkt"))
    assert r.status is Status.FAIL and "accept() would block (no connection yet)" in r.message


@pytest.mark.parametrize("text, message", [
    ("", "the script has no events"),
    ("// only a comment\n`sysctl -q net.ipv4.tcp_sack=1`\n", "the script has no events"),
    ("0.1 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3\n", "first event must be at time 0"),
    ("+.1 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3\n", "first event must be at time 0"),
    ("0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3\n0.2 bind(3, ..., ...) = 0\n"
     "0.1 listen(3, 1) = 0\n", "time goes backward in the script, from 0.2 s to 0.1 s"),
])
def test_script_header_errors(text: str, message: str) -> None:
    r = run_script(parse(text, "t.pkt"))
    assert r.status is Status.ERROR and message in r.message, r.one_line()


@pytest.mark.parametrize("end", ["+0.1", "*", ""])
def test_only_a_plain_time_follows_an_ellipsis(end: str) -> None:
    with pytest.raises(DrillSyntaxError, match="expected a time in seconds after '...'"):
        parse(f"0...{end} read(4, ..., 10) = 10\n", "t.pkt")


# ---------------------------------------------------------------- profiles
@pytest.mark.parametrize("body, feature", [
    ("   +0 setsockopt(4, SOL_TCP, TCP_CORK, [1], 4) = 0\n", "TCP_CORK"),
    ("   +0 setsockopt(4, SOL_TCP, TCP_QUICKACK, [1], 4) = 0\n", "TCP_QUICKACK"),
    ("   +0 getsockopt(4, SOL_TCP, TCP_CORK, [0], [4]) = 0\n", "TCP_CORK"),
    ("   +0 send(4, ..., 10, MSG_MORE) = 10\n", "MSG_MORE"),
])
def test_a_feature_the_profile_lacks_is_unsupported_not_a_failure(body: str,
                                                                  feature: str) -> None:
    r = play(body, profile="windows")
    assert r.status is Status.UNSUPPORTED, r.one_line()
    assert r.message == f"profile windows has no {feature}"
    assert play(body).status is Status.PASS


def test_cli_exit_code_for_a_feature_the_profile_lacks(tmp_path: Path) -> None:
    script = tmp_path / "cork.pkt"
    script.write_text(HANDSHAKE + "   +0 setsockopt(4, SOL_TCP, TCP_CORK, [1], 4) = 0\n")
    proc = _drill(str(script), "--profile", "windows")
    assert proc.returncode == 2 and "unsupported: profile windows has no TCP_CORK" in proc.stderr


# ---------------------------------------------------------------- what a pass left out
def test_a_pass_names_what_the_script_set_that_the_model_does_not_have() -> None:
    """SO_RCVBUF fixes the receive buffer (no autotuning), which the model does not do: it
    plays on without it, and the pass says so. defaults.sh's buffers (tcp_rmem 540000,
    tcp_wmem 262144) are modelled now, and not named."""
    r = run_script(parse("`../common/defaults.sh`\n" + HANDSHAKE
                         + "   +0 setsockopt(4, SOL_SOCKET, SO_RCVBUF, [65536], 4) = 0\n",
                         "d.pkt"))
    assert r.status is Status.PASS, r.one_line()
    assert r.one_line() == "d.pkt: pass (1 outbound packets matched; not modelled: SO_RCVBUF)"
    assert play("").one_line() == "t.pkt: pass (1 outbound packets matched)"


def test_directory_table_shows_what_was_not_modelled_and_verbose_notes(tmp_path: Path) -> None:
    (tmp_path / "d.pkt").write_text("`sysctl -q net.ipv4.tcp_tso_win_divisor=100 "
                                    "net.ipv4.tcp_syncookies=1`\n" + HANDSHAKE)
    proc = _drill(str(tmp_path), "--verbose", columns=250)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "not modelled: TSO deferral (tcp_tso_win_divisor=100)" in proc.stdout
    assert ("d.pkt: note: header: sysctl tcp_syncookies=1 has no effect on the model"
            in proc.stdout)


# ---------------------------------------------------------------- poll()
POLL = """
   +0 setsockopt(4, SOL_TCP, TCP_NOTSENT_LOWAT, [6000], 4) = 0
   +0 fcntl(4, F_SETFL, O_RDWR|O_NONBLOCK) = 0
   +0 write(4, ..., 40000) = 40000
   +0 > P. 1:10001(10000) ack 1
"""


def test_poll_checks_the_events_tcp_poll_reports() -> None:
    ok = play(POLL + "   +0 poll([{fd=4, events=POLLOUT, revents=0}], 1, 0) = 0\n")
    assert ok.status is Status.PASS, ok.one_line()
    wrong = play(POLL + "   +0 poll([{fd=4, events=POLLOUT, revents=POLLOUT}], 1, 0) = 1\n")
    assert wrong.status is Status.FAIL and "poll() expected 1, the model returned 0" in \
        wrong.message, wrong.one_line()
    waits = play(POLL + "   +0 poll([{fd=4, events=POLLOUT, revents=POLLOUT}], 1, 1000) = 1\n")
    assert waits.status is Status.FAIL and "would block" in waits.message, waits.one_line()
    timeout = play(POLL + "   +0...1 poll([{fd=4, events=POLLOUT, revents=0}], 1, 1000) = 0\n")
    assert timeout.status is Status.UNSUPPORTED, timeout.one_line()
    readable = play("   +0 poll([{fd=4, events=POLLIN|POLLOUT, revents=POLLOUT}], 1, 0) = 1\n"
                    "+.01 < P. 1:11(10) ack 1 win 512\n"
                    "   +0 poll([{fd=4, events=POLLIN, revents=POLLIN}], 1, 0) = 1\n")
    assert readable.status is Status.PASS, readable.one_line()
