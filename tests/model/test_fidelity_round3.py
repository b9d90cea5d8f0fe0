"""Model tests for issue 26's behaviours (fidelity round 3): each drives the model where a
kernel rule decides, and asserts the decision measured on this machine's kernel (6.18,
HZ=250) with packetdrill. The scripts that show the kernel's side are in tests/drill/
(their headers say how they were run); these tests pin the rule itself."""

from __future__ import annotations

import pytest

from nagle_sim.model import Side, SocketError, State

from .harness import Harness, ms


def server() -> Harness:
    h = Harness(side=Side.SERVER, mss=1000)
    h.accept(0, ms(10))
    h.take()
    return h


# ------------------------------------------------ shutdown (tcp_shutdown, tcp_send_fin)
def test_shut_wr_sends_the_fin_after_the_data_and_keeps_receiving() -> None:
    h = server()
    h.write(ms(10), 300)
    h.ep.shutdown(h.now, "wr")
    h._collect()
    assert [(s.flags, s.seg.seq, s.seg.length) for s in h.take()] == [
        ("PA", 1, 300), ("FA", 301, 0)]
    assert h.ep.state is State.FIN_WAIT1
    h.peer(ms(20), seq=1, ack=302)
    assert h.ep.state is State.FIN_WAIT2
    with pytest.raises(SocketError) as err:
        h.write(ms(20), 10)
    assert err.value.errno == "EPIPE"
    h.peer(ms(30), seq=1, ack=302, length=200, flags="PA")      # half close: taken in
    assert [(s.flags, s.seg.ack) for s in h.take()] == [("A", 201)]
    assert h.read(ms(30)) == 200


def test_shut_rd_reads_zero_but_still_takes_data() -> None:
    h = server()
    h.ep.shutdown(h.now, "rd")
    assert h.ep.eof and h.read(ms(10)) == 0
    h.peer(ms(20), seq=1, ack=1, length=200, flags="PA")
    assert [s.seg.ack for s in h.take()] == [201]      # ACKed, not reset
    assert not h.ep.eof and h.read(ms(20)) == 200 and h.read(ms(20)) == 0


def test_shut_rdwr_then_data_resets_and_the_read_reports_it_once() -> None:
    h = server()
    h.ep.shutdown(h.now, "rdwr")
    h._collect()
    h.peer(ms(20), seq=1, ack=2)                        # our FIN ACKed: FIN_WAIT2
    h.take()
    h.peer(ms(30), seq=1, ack=2, length=100, flags="PA")
    assert [(s.flags, s.seg.seq) for s in h.take()] == [("R", 2)]
    assert h.ep.state is State.CLOSED
    with pytest.raises(SocketError) as err:
        h.read(ms(30))
    assert err.value.errno == "ECONNRESET"
    assert h.read(ms(30)) == 0                          # sock_error clears it


def test_close_after_shut_wr_sends_nothing_more() -> None:
    h = server()
    h.ep.shutdown(h.now, "wr")
    h._collect()
    h.take()
    h.close(ms(15))
    assert h.take() == [] and h.ep.state is State.FIN_WAIT1
    h.peer(ms(20), seq=1, ack=2, length=100, flags="PA")   # now RCV_SHUTDOWN: reset
    assert [(s.flags, s.seg.seq) for s in h.take()] == [("R", 2)]


def test_shutdown_in_close_wait_goes_to_last_ack() -> None:
    h = server()
    h.peer(ms(20), seq=1, ack=1, flags="FA")
    assert h.ep.state is State.CLOSE_WAIT
    h.ep.shutdown(h.now, "wr")
    assert h.ep.state is State.LAST_ACK


def test_a_received_reset_is_the_next_calls_error() -> None:
    h = server()
    h.peer(ms(20), seq=1, ack=1, flags="R")
    with pytest.raises(SocketError) as err:
        h.write(ms(20), 10)
    assert err.value.errno == "ECONNRESET"
    with pytest.raises(SocketError) as err:
        h.write(ms(20), 10)
    assert err.value.errno == "EPIPE"


def test_time_wait_reads_as_close_in_tcp_info() -> None:
    """tcp_time_wait closes the full socket; packetdrill's tcpi_state is TCP_CLOSE."""
    h = server()
    h.ep.shutdown(h.now, "wr")
    h.peer(ms(20), seq=1, ack=2)
    h.peer(ms(30), seq=1, ack=2, flags="FA")
    assert h.ep.state is State.TIME_WAIT
    assert h.ep.tcp_info().state is State.CLOSED


# ------------------------------------------------ tcp_info
def test_initial_ssthresh_is_the_kernels_infinity() -> None:
    """TCP_INFINITE_SSTHRESH (0x7fffffff) until a loss: packetdrill on 6.18 reads
    tcpi_snd_ssthresh == 2147483647 after the handshake (the model said 1 << 30)."""
    assert server().ep.tcp_info().snd_ssthresh == 0x7FFFFFFF
