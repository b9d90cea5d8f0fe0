"""Model tests for the rules found by comparing random scenarios with the kernel (issue 11,
round 2): each drives the model where the rule decides and asserts the kernel's decision.
The real-kernel agreement tests on the same shapes are in
tests/realnet/test_fidelity_rules.py."""

from __future__ import annotations

from pathlib import Path

from nagle_sim import scenario
from nagle_sim.model import Side
from nagle_sim.sim.driver import run_sim
from nagle_sim.trace import Outcome, Trace

from .harness import Harness, ms


def sim(text: str) -> Trace:
    trace = run_sim(scenario.loads(text))
    assert trace.outcome is Outcome.OK, trace.message
    return trace


def loopback_server(mss: int = 1448) -> Harness:
    h = Harness(side=Side.SERVER, mss=mss)
    h.ep.set_gso_wire(True)
    h.accept(0, 20)
    return h


# ------------------------------------------------ the scaling ratio of a GSO skb
def test_a_gso_skb_measures_its_gso_size_not_its_length() -> None:
    """tcp_measure_rcv_mss: len = gso_size ?: skb->len, and scaling_ratio changes only when
    that len differs from rcv_mss. A loopback write of 3000 B arrives as one GSO skb
    (gso_size = MSS): the first sets rcv_mss 1448 and the ratio from its 3000 B over its
    truesize (199/256); a later 2896-byte GSO skb has len 1448 = rcv_mss and leaves the
    ratio alone (the model took 2896 B as its len and set 197, so the window it could
    offer with that skb unread fell one scale unit under the last one advertised)."""
    h = loopback_server()
    sk = h.ep._sk
    h.peer(ms(1), seq=1, ack=1, length=3000, flags="PA")
    assert (sk.rcv.rcv_mss, sk.rcv.scaling_ratio) == (1448, 3000 * 256 // (3000 + 852))
    h.read(ms(1) + 10)
    h.peer(ms(2), seq=3001, ack=1, length=2896, flags="PA")
    assert sk.rcv.scaling_ratio == 199


def test_nagle_held_remainder_leaves_before_the_next_write_on_loopback() -> None:
    """examples/fuzz/seed-18.toml (kernel, every round after the first: 2896 B, the peer's ACK,
    104 B, then the next write's 1000 B held ~44 ms by Nagle behind the 104 B). The
    3000-byte write's 104 B tail waits behind the unACKed 100 B. On loopback the peer's
    reaction to the 2896 B — its immediate ACK, or the ACK of its reader, woken by them —
    is back before the write returns (the receive path runs inside the sender's call), so
    the 104 B leave alone and the next write's 1000 B wait for the delayed ACK. The old
    model let the next write start 2 µs before the reader's ACK came back: it joined the
    104 B (1104 B) and nothing waited."""
    trace = sim(S18)
    data = [s for s in trace.segments if s.src is Side.CLIENT and s.length]
    lengths = [s.length for s in data]
    rounds = [i for i in range(len(data) - 2) if lengths[i:i + 3] == [2896, 104, 1000]]
    assert len(rounds) == 3, lengths        # round 1 goes whole: quick ACKs
    for i in rounds:
        assert 38_000 <= data[i + 2].t - data[i + 1].t <= 46_000, lengths


S18 = (Path(__file__).resolve().parent / "loopback_remainder.toml").read_text("utf-8")


# ------------------------------------------------ a FIN's own skb in the receive queue
def _fin_after_read(h: Harness) -> None:
    """The peer's 100 B are read, then its FIN arrives alone; we are in ping-pong."""
    h.write(ms(1), 10)
    h.peer(ms(2), seq=1, ack=11, length=100, flags="PA")
    assert h.read(ms(2) + 10, 100) == 100
    h.write(ms(3), 10)                                      # reply within ato: ping-pong
    h.take()
    h.peer(ms(4), seq=101, ack=21, length=100, flags="PA")
    assert h.read(ms(4) + 10) == 100
    assert not [s for s in h.out if not s.seg.length], "ping-pong: the read sends no ACK"
    h.peer(ms(4) + 50, seq=201, ack=21, flags="FA")


def test_quickack_does_not_ack_while_a_lone_fin_skb_is_unread() -> None:
    """__tcp_cleanup_rbuf ACKs a pushed segment only when the read emptied the receive
    queue (!sk_rmem_alloc). A FIN that arrives alone, after its data was read, is a skb of
    its own that stays queued until a read with room left reaches it (tcp_recvmsg's
    found_fin_ok): TCP_QUICKACK=1 then sends nothing, and the FIN is ACKed by the
    delayed-ACK timer (the FIN entered ping-pong) or by our own FIN. Measured
    (examples/fuzz/seed-53.toml, seed-55.toml): no ACK after `set quickack on`; our close
    carried it."""
    h = loopback_server(1000)
    _fin_after_read(h)
    h.take()
    h.setopt(ms(5), "quickack", True)
    assert h.take() == [], "no ACK: the FIN's skb keeps the queue non-empty"
    h.advance(ms(60))
    acks = [s for s in h.take() if not s.seg.length]
    assert acks and acks[0].seg.ack == 202 and 40_000 <= acks[0].t - ms(4) <= 50_000


def test_a_read_with_room_left_takes_the_fin_and_quickack_acks() -> None:
    """The same, but the application reads again (EOF): tcp_recvmsg frees the FIN's skb,
    the queue is empty, and TCP_QUICKACK=1 sends the pending ACK at once."""
    h = loopback_server(1000)
    _fin_after_read(h)
    assert h.read(ms(5), 100) == 0
    h.take()
    h.setopt(ms(5) + 10, "quickack", True)
    acks = [s for s in h.take() if not s.seg.length]
    assert [a.seg.ack for a in acks] == [202]


def _fin_behind_unread_data(h: Harness) -> None:
    """In ping-pong, the peer's 100 B and, 20 µs later, its FIN arrive before we read."""
    h.write(ms(1), 10)
    h.peer(ms(2), seq=1, ack=11, length=100, flags="PA")
    assert h.read(ms(2) + 10, 100) == 100
    h.write(ms(3), 10)
    h.peer(ms(4), seq=101, ack=21, length=100, flags="PA")
    h.peer(ms(4) + 20, seq=201, ack=21, flags="FA")
    assert h.read(ms(4) + 50, 100) == 100
    h.take()


def test_a_fin_on_queued_data_is_freed_with_it() -> None:
    """tcp_try_coalesce: over a TUN link a FIN arriving while its data is still queued
    joins that skb and is freed when the read reaches the data's end, so the read that
    drains the data empties the queue (the FIN entered ping-pong, so the read itself does
    not ACK, but TCP_QUICKACK=1 does)."""
    h = Harness(side=Side.SERVER, mss=1000)
    h.accept(0, 20)
    _fin_behind_unread_data(h)
    h.setopt(ms(5), "quickack", True)
    assert [s.seg.ack for s in h.take() if not s.seg.length] == [202]


def test_on_loopback_a_fin_behind_unacked_data_stays_its_own_skb() -> None:
    """skb_try_coalesce refuses a cloned skb, and on loopback the queued data skb is the
    sender's clone until our ACK lets the sender free its original: a FIN behind data we
    have not ACKed stays a skb of its own, the read of the data leaves it queued, and
    TCP_QUICKACK=1 sends nothing (examples/fuzz/seed-18.toml's and seed-55.toml's last round: the
    kernel's FIN was ACKed only when its loss probe came, 8 ms later)."""
    h = loopback_server(1000)
    _fin_behind_unread_data(h)
    h.setopt(ms(5), "quickack", True)
    assert h.take() == []
    h.advance(ms(60))
    assert [s.seg.ack for s in h.take() if not s.seg.length][:1] == [202]
