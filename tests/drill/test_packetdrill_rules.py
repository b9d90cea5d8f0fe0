"""`nagle-sim drill` follows packetdrill's own rules (read in its sources, run_packet.c,
packet.c, code.c, lexer.l): outbound packets merged until they fill a line unless
--strict-segments, backslash-newline continuation in commands, code blocks run at the
end with what Python accepts, getsockopt(SO_ERROR), TCP options checked, and scripts
whose subject the model cannot check are unsupported rather than passed.

Every script here whose verdict rests on the kernel's behaviour was also run with
packetdrill (google/packetdrill, built in a scratch directory) against this machine's
kernel (6.18), as root, each in its own network namespace, with and without
--strict_segments; the docstrings say what packetdrill reported. These scripts were
written for this project.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nagle_sim.drill import Status, parse, run_script
from nagle_sim.drill.runner import _fragment_mismatch
from nagle_sim.model import Segment, Side
from nagle_sim.model.events import parse_flags

HERE = Path(__file__).parent
CUBIC = "`sysctl -q net.ipv4.tcp_congestion_control=cubic`\n"
HANDSHAKE = """
    0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3
   +0 bind(3, ..., ...) = 0
   +0 listen(3, 1) = 0
   +0 < S 0:0(0) win 65535 <mss 1000,nop,wscale 7>
   +0 > S. 0:0(0) ack 1 <...>
 +.01 < . 1:1(0) ack 1 win 512
   +0 accept(3, ..., ...) = 4
"""


def play(text: str, **kw: object):  # noqa: ANN201
    return run_script(parse(text, "r.pkt"), **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------- merging
GSO_OFF = ("`sysctl -q net.ipv4.tcp_congestion_control=cubic\n"
           "ethtool -K tun0 tso off gso off`\n")


def test_segments_merge_into_the_line_they_fill_and_strict_mode_keeps_them_apart() -> None:
    """The initial window leaves as five 2-segment TSO skbs; one line expecting all
    10000 bytes passes by merging, and fails with --strict-segments on the first skb.
    packetdrill on the kernel: passes; with --strict_segments "live packet payload:
    expected 10000 bytes vs actual 2000 bytes" at the same line."""
    text = CUBIC + HANDSHAKE + ("   +0 write(4, ..., 10000) = 10000\n"
                                "   +0 > P. 1:10001(10000) ack 1\n")
    merged = play(text)
    assert merged.status is Status.PASS, merged.one_line()
    assert merged.summary() == "2 outbound packets matched (from 6 model segments)"
    strict = play(text, strict_segments=True)
    assert strict.status is Status.FAIL and strict.line == 11, strict.one_line()
    assert strict.message == ("payload expected 10000 bytes, the model sent 2000 "
                              "(P. 1:2001(2000) ack 1 at 0.01 s)")
    header = play("--strict_segments\n" + text)          # the script may ask for it too
    assert header.status is Status.FAIL and header.line == 12


def test_the_merged_packet_takes_the_last_ones_flags() -> None:
    """TSO and GSO off: a 1500-byte write leaves as . 1:1001 then P. 1001:1501; merged,
    they are P. (packet.c aggregate_packets copies the last packet's headers).
    packetdrill on the kernel: the P. line passes; the . line fails "live packet field
    tcp_psh: expected: 0 vs actual: 1"; with --strict_segments both fail on 1000 bytes."""
    body = GSO_OFF + HANDSHAKE + "   +0 write(4, ..., 1500) = 1500\n"
    assert play(body + "   +0 > P. 1:1501(1500) ack 1\n").status is Status.PASS
    no_psh = play(body + "   +0 > . 1:1501(1500) ack 1\n")
    assert no_psh.status is Status.FAIL, no_psh.one_line()
    assert no_psh.message.startswith("flags expected ., got P.")
    assert "(merged from 2 segments)" in no_psh.message
    strict = play(body + "   +0 > P. 1:1501(1500) ack 1\n", strict_segments=True)
    assert strict.status is Status.FAIL
    assert strict.message.startswith("payload expected 1500 bytes, the model sent 1000")


def test_the_merged_packet_takes_the_last_ones_time() -> None:
    """Two NODELAY writes 10 ms apart, one line 10 ms after the first: the merged packet
    is on time because its time is the second packet's (the first alone would be 10 ms
    early, beyond the 4 ms tolerance). packetdrill on the kernel: passes; with
    --strict_segments "expected 1000 bytes vs actual 500 bytes"."""
    text = CUBIC + HANDSHAKE + ("   +0 setsockopt(4, SOL_TCP, TCP_NODELAY, [1], 4) = 0\n"
                                "   +0 write(4, ..., 500) = 500\n"
                                " +.01 write(4, ..., 500) = 500\n"
                                "   +0 > P. 1:1001(1000) ack 1\n")
    assert play(text).status is Status.PASS
    strict = play(text, strict_segments=True)
    assert strict.status is Status.FAIL and "expected 1000 bytes, the model sent 500" in \
        strict.message


def test_more_bytes_than_the_line_expects_is_a_payload_failure() -> None:
    """A 2000-byte skb where the line wants 1000: packetdrill stops merging once it has
    enough and compares totals ("expected 1000 bytes vs actual 2000 bytes")."""
    r = play(CUBIC + HANDSHAKE + "   +0 write(4, ..., 2000) = 2000\n"
             "   +0 > P. 1:1001(1000) ack 1\n")
    assert r.status is Status.FAIL
    assert r.message.startswith("payload expected 1000 bytes, the model sent 2000")


def _seg(seq: int, length: int, flags: str = "A", ack: int = 1,
         window: int = 65536) -> Segment:
    return Segment(src=Side.SERVER, seq=seq, ack=ack, length=length,
                   flags=parse_flags(flags), window=window)


@pytest.mark.parametrize("prev, cur, sniffed, expected, why", [
    (_seg(1, 1000), _seg(1001, 1000), 1000, 3000, None),
    (_seg(1, 1000), _seg(1001, 500, "PA"), 1000, 1500, None),           # PSH may differ
    (_seg(1, 1000, "PA"), _seg(1001, 1000), 1000, 3000, None),
    (_seg(1, 1000), _seg(1001, 400), 1000, 1400, None),                 # the last piece
    (_seg(1, 1000), _seg(2001, 1000), 1000, 3000, "seq 2001 does not continue 1001"),
    (_seg(1, 1000), _seg(1001, 1000, ack=5), 1000, 3000, "ack 5 after ack 1"),
    (_seg(1, 1000), _seg(1001, 1000, window=131072), 1000, 3000, "win 1024 after win 512"),
    (_seg(1, 1000), _seg(1001, 500), 1000, 3000, "a 500-byte piece after a 1000-byte one"),
    (_seg(1, 1000), _seg(1001, 0, "RA"), 1000, 3000, "flags R. after ."),
], ids=["same", "psh", "psh-first", "short-last", "gap", "ack", "window", "short-middle",
        "rst"])
def test_what_packetdrill_merges(prev: Segment, cur: Segment, sniffed: int, expected: int,
                                 why: str | None) -> None:
    """run_packet.c verify_packet_fragments: all header fields but FIN, PSH and CWR the
    same, the next sequence number, equal lengths except for the piece that fills up."""
    got = _fragment_mismatch(prev, cur, sniffed, expected, wscale=7)
    assert got == why if why is None else (got is not None and why in got)


# ---------------------------------------------------------------- continuation lines
def test_a_continued_command_line_takes_effect() -> None:
    """The shell joins a backslash-newline: tcp_min_tso_segs=10 on the second line makes
    the initial window's skbs five segments (half the cwnd, tcp_cwnd_test). packetdrill
    on the kernel: passes; with --strict_segments "expected 10000 bytes vs actual 5000"."""
    text = ("`sysctl -q net.ipv4.tcp_congestion_control=cubic \\\n"
            "        net.ipv4.tcp_min_tso_segs=10`\n" + HANDSHAKE +
            "   +0 write(4, ..., 10000) = 10000\n   +0 > P. 1:10001(10000) ack 1\n")
    assert play(text).status is Status.PASS
    strict = play(text, strict_segments=True)
    assert strict.status is Status.FAIL and strict.line == 12
    assert "expected 10000 bytes, the model sent 5000" in strict.message


@pytest.mark.parametrize("sysctl, reason", [
    ("net.ipv4.tcp_mtu_probing=2", "sysctl tcp_mtu_probing=2: path MTU probing"),
    ("net.ipv4.tcp_base_mss=512", "sysctl tcp_base_mss is not modelled"),
    ("net.ipv6.conf.all.disable_ipv6=1", "is not modelled"),
    ("net.ipv4.tcp_notsent_lowat=4000", "TCP_NOTSENT_LOWAT"),
])
def test_an_unmodelled_sysctl_on_a_continuation_line_makes_the_script_unsupported(
        sysctl: str, reason: str) -> None:
    text = (f"`sysctl -q net.ipv4.tcp_congestion_control=cubic \\\n        {sysctl}`\n"
            + HANDSHAKE)
    r = play(text)
    assert r.status is Status.UNSUPPORTED, r.one_line()
    assert reason in r.message


@pytest.mark.parametrize("command, reason", [
    ("tc qdisc replace dev tun0 root fq", "fq qdisc"),
    ("tc qdisc add dev tun0 root pfifo limit 0", "drops every packet"),
    ("ip route change 192.0.2.1 via 192.168.0.2 dev tun0 advmss 600", "not modelled"),
    ("echo 0 > /sys/module/tcp_cubic/parameters/hystart_detect", "hystart_detect=0"),
    ("ethtool -K tun0 gro off", "not modelled"),
    ("some-tool --flag", "the command 'some-tool --flag' is not modelled"),
])
def test_a_command_the_model_cannot_follow_is_unsupported(command: str, reason: str) -> None:
    r = play(f"`{command}`\n" + HANDSHAKE)
    assert r.status is Status.UNSUPPORTED, r.one_line()
    assert reason in r.message


def test_harmless_commands_pass_with_notes() -> None:
    r = play("`../common/defaults.sh\nip tcp_metrics flush all > /dev/null 2>&1\n"
             "tc qdisc add dev tun0 root pfifo\n"
             "echo 3 > /sys/module/tcp_cubic/parameters/hystart_detect`\n" + HANDSHAKE +
             "   +0 `grep \" 0A \" /proc/net/tcp | grep \":1F90\"`\n")
    assert r.status is Status.PASS, r.one_line()
    assert any("tcp_cubic hystart_detect=3 is the default" in n for n in r.notes)
    assert any("grep" in n and "changes nothing" in n for n in r.notes)


# ---------------------------------------------------------------- code blocks
def test_code_blocks_print_and_keep_their_names_for_later_blocks() -> None:
    """As in packetdrill's one generated Python file: a name set in a block is seen by
    the next; print() goes to the notes (--verbose)."""
    r = play(CUBIC + HANDSHAKE +
             "   +0 %{ print(tcpi_snd_cwnd); cwnd = 10; assert tcpi_snd_cwnd == cwnd, "
             "tcpi_snd_cwnd }%\n"
             "   +0 %{ cwnd += 0; assert tcpi_snd_cwnd == cwnd }%\n"
             "   +0 %{ TCP_INFINITE_SSTHRESH = 0x7fffffff }%\n")
    assert r.status is Status.PASS, r.one_line()
    assert "line 10: print: 10" in r.notes


def test_a_code_block_may_end_in_a_continued_line() -> None:
    """packetdrill writes two newlines after each block, so ``…;\\`` before ``}%`` is
    valid Python (tcp-info-rwnd-limited.pkt's form)."""
    r = play(CUBIC + HANDSHAKE + "   +0 %{ assert tcpi_snd_cwnd == 10, tcpi_snd_cwnd;\\\n"
             "         assert tcpi_state == TCP_ESTABLISHED;\\\n}%\n")
    assert r.status is Status.PASS, r.one_line()


def test_the_kernels_constants_are_defined() -> None:
    r = play(CUBIC + HANDSHAKE + "   +0 %{ assert tcpi_state in (TCP_ESTABLISHED, TCP_CLOSE) "
             "and TCP_CA_Open == 0 and TCP_SYN_RECV == 3 and TCPI_OPT_SACK == 2 }%\n")
    assert r.status is Status.PASS, r.one_line()


def test_code_blocks_run_after_the_script_as_packetdrill_runs_them() -> None:
    """A failed assertion is reported after every packet has been checked: a later
    packet failure comes first, as packetdrill only runs the code at the end."""
    bad_code = "   +0 %{ assert tcpi_snd_cwnd == 3, 'cwnd is %d' % tcpi_snd_cwnd }%\n"
    alone = play(CUBIC + HANDSHAKE + bad_code)
    assert alone.status is Status.FAIL and alone.line == 10, alone.one_line()
    assert alone.message == ("assertion failed: tcpi_snd_cwnd == 3: cwnd is 10 "
                             "(tcpi_snd_cwnd=10)")
    then_packet = play(CUBIC + HANDSHAKE + bad_code + "   +0 write(4, ..., 10) = 10\n"
                       "   +0 > P. 5:15(10) ack 1\n")
    assert then_packet.status is Status.FAIL and then_packet.line == 12


@pytest.mark.parametrize("code, status, reason", [
    ("assert undefined_name == 1", Status.ERROR, "NameError"),
    ("assert tcpi_sacked == 0", Status.UNSUPPORTED, "tcpi_sacked is not modelled"),
    ("import os", Status.UNSUPPORTED, "outside the supported subset"),
    ("x = 2\n   x = 3", Status.ERROR, "unexpected indent"),
    ("x = 1 << 200; x = x * x", Status.ERROR, "beyond 2**256"),
    ("print('%099999999d' % 1)", Status.UNSUPPORTED, "a format other than"),
])
def test_code_block_problems(code: str, status: Status, reason: str) -> None:
    r = play(CUBIC + HANDSHAKE + f"   +0 %{{ {code} }}%\n")
    assert r.status is status, r.one_line()
    assert reason in r.message


# ---------------------------------------------------------------- SO_ERROR
def test_so_error_reads_0_on_a_healthy_connection() -> None:
    ok = play(CUBIC + HANDSHAKE + "   +0 getsockopt(4, SOL_SOCKET, SO_ERROR, [0], [4]) = 0\n")
    assert ok.status is Status.PASS, ok.one_line()
    bad = play(CUBIC + HANDSHAKE + "   +0 getsockopt(4, SOL_SOCKET, SO_ERROR, [ECONNRESET], "
               "[4]) = 0\n")
    assert bad.status is Status.FAIL
    assert bad.message == "getsockopt SO_ERROR: expected [ECONNRESET], the model's socket has [0]"


def test_so_error_after_a_reset_is_read_once() -> None:
    """tcp_reset on an established connection leaves ECONNRESET; reading clears it
    (so_error_refused.pkt covers ECONNREFUSED, run on the kernel)."""
    r = play(CUBIC + HANDSHAKE + "+.01 < R. 1:1(0) ack 1 win 512\n"
             "   +0 getsockopt(4, SOL_SOCKET, SO_ERROR, [ECONNRESET], [4]) = 0\n"
             "   +0 getsockopt(4, SOL_SOCKET, SO_ERROR, [0], [4]) = 0\n")
    assert r.status is Status.PASS, r.one_line()


# ---------------------------------------------------------------- TCP options
def test_the_syn_acks_options_are_checked() -> None:
    """The peer offers MSS and window scaling only: Linux answers with MSS 1460 and window
    scale 10 (tcp_rmem[2] = 32 MB here). Writing what the kernel does not send fails, as
    packetdrill's "bad outbound TCP options" does."""
    ok = play(CUBIC + HANDSHAKE.replace("<...>", "<mss 1460,nop,wscale 10>"))
    assert ok.status is Status.PASS, ok.one_line()
    wrong = play(CUBIC + HANDSHAKE.replace("<...>", "<mss 1460,nop,nop,sackOK,nop,wscale 8>"))
    assert wrong.status is Status.FAIL and wrong.line == 7
    assert wrong.message.startswith("TCP options expected <mss 1460,nop,nop,sackOK,nop,"
                                    "wscale 8>, the model's are <mss 1460,nop,wscale 10>")


def test_a_line_without_options_expects_none() -> None:
    """Timestamps agreed: a data line written without ``<…>`` fails, as on the kernel
    (packetdrill there: "live packet field ipv4_total_length: expected: 1028 vs actual:
    1040")."""
    text = (CUBIC + HANDSHAKE.replace("<mss 1000,nop,wscale 7>",
                                      "<mss 1000,sackOK,TS val 100 ecr 0,nop,wscale 7>")
            + "   +0 write(4, ..., 988) = 988\n   +0 > P. 1:989(988) ack 1\n")
    r = play(text)
    assert r.status is Status.FAIL and r.line == 11
    assert r.message.startswith("TCP options expected <>, the model's are <nop,nop,TS val")
    ok = play(text.replace("ack 1\n", "ack 1 <nop,nop,TS val 1 ecr 100>\n"))
    assert ok.status is Status.PASS, ok.one_line()


def test_timestamp_values_are_checked_only_with_a_tick() -> None:
    """--tcp_ts_tick_usecs=1000: the model's millisecond clock, mapped as packetdrill maps
    the first value it sees. packetdrill on the kernel: 5510 passes, 5600 fails "bad
    outbound TCP timestamp value" (the kernel sent 5511)."""
    text = ("--tcp_ts_tick_usecs=1000\n" + CUBIC +
            HANDSHAKE.replace("<mss 1000,nop,wscale 7>",
                              "<mss 1000,sackOK,TS val 100 ecr 0,nop,wscale 7>") +
            "   +0 write(4, ..., 100) = 100\n"
            "   +0 > P. 1:101(100) ack 1 <nop,nop,TS val 5000 ecr 100>\n"
            "+.01 < . 1:1(0) ack 101 win 512 <nop,nop,TS val 110 ecr 5000>\n"
            "  +.5 write(4, ..., 100) = 100\n"
            "   +0 > P. 101:201(100) ack 1 <nop,nop,TS val 5510 ecr 110>\n")
    assert play(text).status is Status.PASS
    late = play(text.replace("TS val 5510", "TS val 5600"))
    assert late.status is Status.FAIL and late.line == 15
    assert "timestamp value expected 5600, the model's maps to 5510" in late.message
    assert play(text.replace("TS val 5510", "TS val 5600").replace(
        "--tcp_ts_tick_usecs=1000\n", "")).status is Status.PASS


@pytest.mark.parametrize("line, reason", [
    ("+.01 < . 1:1(0) ack 1 win 514 <md5 000102030405060708090a0b0c0d0e0f,nop,nop>",
     "MD5 signatures"),
    ("+.01 < . 1:1(0) ack 1 win 514 <FO abcd1234,nop,nop>", "Fast Open"),
    ("+.01 < . 1:1(0) ack 1 win 514 <nop,nop,sack 1:2>", "SACK blocks"),
    ("   +0 > . 1:1(0) ack 1 <nop,nop,sack 1:2>", "SACK blocks on outbound packets"),
], ids=["md5", "fastopen", "sack-in", "sack-out"])
def test_a_script_about_options_the_model_lacks_is_unsupported_not_passed(
        line: str, reason: str) -> None:
    """md5/md5-only-on-client-ack.pkt "passed" before options were looked at: a segment
    signed with MD5 is dropped by a kernel without the key, and the model cannot say."""
    r = play(CUBIC + HANDSHAKE + line + "\n")
    assert r.status is Status.UNSUPPORTED, r.one_line()
    assert reason in r.message


def test_a_timestamp_going_backwards_is_unsupported() -> None:
    """PAWS drops it on the kernel (tcp_paws_discard); the model keeps no timestamps."""
    r = play(CUBIC + HANDSHAKE.replace("<mss 1000,nop,wscale 7>",
                                       "<mss 1000,sackOK,TS val 100 ecr 0,nop,wscale 7>")
             + "+.01 < P. 1:11(10) ack 1 win 512 <nop,nop,TS val 50 ecr 1>\n")
    assert r.status is Status.UNSUPPORTED and "PAWS" in r.message


@pytest.mark.parametrize("header, reason", [
    ("--ip_version=ipv6", "IPv6"), ("--mtu=1280", "MTU of 1280"),
    ("--non_fatal=packet", "non_fatal"),
])
def test_header_options_the_model_cannot_follow(header: str, reason: str) -> None:
    r = play(header + "\n" + CUBIC + HANDSHAKE)
    assert r.status is Status.UNSUPPORTED and reason in r.message, r.one_line()


# ---------------------------------------------------------------- the command
def test_cli_strict_segments() -> None:
    script = str(HERE / "burst_merged.pkt")
    merged = subprocess.run([sys.executable, "-m", "nagle_sim", "drill", script],
                            capture_output=True, text=True, timeout=120)
    assert merged.returncode == 0 and "from 6 model segments" in merged.stdout
    strict = subprocess.run([sys.executable, "-m", "nagle_sim", "drill", "--strict-segments",
                             script], capture_output=True, text=True, timeout=120)
    assert strict.returncode == 1
    assert "burst_merged.pkt:18: fail: payload expected 10000 bytes" in strict.stderr


def test_tcp_info_reports_what_the_syns_agreed() -> None:
    """tcpi_options, tcpi_snd_wscale, tcpi_rcv_wscale (tcp_get_info). packetdrill on the
    kernel: passes (peer SYN with SACK-permitted and window scale 7, no timestamps;
    tcp_rmem[2] = 6 MB)."""
    r = play("`sysctl -q net.ipv4.tcp_congestion_control=cubic "
             "net.ipv4.tcp_rmem=\"4096 131072 6291456\"`\n" +
             HANDSHAKE.replace("<mss 1000,nop,wscale 7>", "<mss 1000,nop,nop,sackOK,nop,wscale 7>")
             + "   +0 %{ assert tcpi_options == TCPI_OPT_SACK | TCPI_OPT_WSCALE, tcpi_options;"
             " assert tcpi_snd_wscale == 7 and tcpi_rcv_wscale == 7 }%\n")
    assert r.status is Status.PASS, r.one_line()


def test_a_pass_names_the_buffers_it_did_not_bound() -> None:
    r = play(CUBIC + HANDSHAKE + "   +0 setsockopt(4, SOL_SOCKET, SO_SNDBUF, [4096], 4) = 0\n")
    assert r.status is Status.PASS
    assert r.one_line() == "r.pkt: pass (1 outbound packets matched; not modelled: SO_SNDBUF)"


def test_a_backslash_escapes_a_backtick_inside_a_command() -> None:
    """packetdrill's lexer: `(\\.|[^`])*` — an escaped backtick does not end the command."""
    script = parse("`echo a\\`b`\n" + HANDSHAKE, "e.pkt")
    assert [c.text for c in script.init_commands] == ["echo a\\`b"]


def test_so_error_compares_numbers_as_packetdrill_does() -> None:
    """packetdrill resolves ECONNRESET to 104 and compares integers: either spelling."""
    r = play(CUBIC + HANDSHAKE + "+.01 < R. 1:1(0) ack 1 win 512\n"
             "   +0 getsockopt(4, SOL_SOCKET, SO_ERROR, [104], [4]) = 0\n")
    assert r.status is Status.PASS, r.one_line()
    bad = play(CUBIC + HANDSHAKE + "   +0 getsockopt(4, SOL_SOCKET, SO_ERROR, [111], [4]) = 0\n")
    assert bad.status is Status.FAIL
    assert bad.message == ("getsockopt SO_ERROR: expected [ECONNREFUSED], the model's socket "
                           "has [0]")


def test_options_are_checked_only_against_linux_profiles() -> None:
    """The layout worked out is Linux's: under another stack's profile the options go
    unchecked, and the pass says so."""
    text = CUBIC + HANDSHAKE.replace("<...>", "<mss 1460,nop,wscale 10>")
    assert play(text, profile="linux-5.4").one_line() == "r.pkt: pass (1 outbound packets " \
        "matched)"
    assert play(text, profile="windows").one_line() == ("r.pkt: pass (1 outbound packets "
                                                        "matched; not modelled: TCP options "
                                                        "(profile windows))")
