"""The pure rule functions as decision tables: what a lesson can show line by line."""

from __future__ import annotations

import pytest

from nagle_sim.model import Reason
from nagle_sim.model.config import NagleStyle
from nagle_sim.model.rate import tcp_cwnd_test
from nagle_sim.model.send import tcp_minshall_check, tcp_nagle_check
from nagle_sim.model.state import Nonagle, SendState

OFF, CORK = Nonagle.OFF, Nonagle.CORK
SMALL_UNACKED = SendState(snd_una=100, snd_nxt=200, snd_sml=200)   # sent 150:200, unACKed
SMALL_ACKED = SendState(snd_una=200, snd_nxt=1200, snd_sml=200)    # then a full 1000


def test_minshall_looks_only_at_the_last_small_segment() -> None:
    assert tcp_minshall_check(SMALL_UNACKED)
    assert not tcp_minshall_check(SMALL_ACKED), "unACKed full segments do not count"


@pytest.mark.parametrize(("partial", "nonagle", "in_flight", "snd", "more", "held"), [
    (False, 0, 5, SMALL_UNACKED, False, None),               # a full segment always goes
    (True, CORK, 0, SMALL_ACKED, False, Reason.CORK_HOLD),   # corked: held even when idle
    (True, CORK, 0, SMALL_ACKED, True, Reason.MORE_HOLD),    # MSG_MORE corks this push
    (True, CORK | OFF, 0, SMALL_ACKED, False, Reason.CORK_HOLD),   # NODELAY does not uncork
    (True, OFF, 5, SMALL_UNACKED, False, None),              # NODELAY: Nagle off
    (True, 0, 0, SMALL_UNACKED, False, None),                # nothing in flight
    (True, 0, 5, SMALL_UNACKED, False, Reason.NAGLE_HOLD),   # the Nagle hold
    (True, 0, 5, SMALL_ACKED, False, None),                  # Minshall: small one was ACKed
])
def test_the_nagle_rule(partial: bool, nonagle: int, in_flight: int, snd: SendState,
                        more: bool, held: Reason | None) -> None:
    assert tcp_nagle_check(partial, snd, nonagle, in_flight, NagleStyle.MINSHALL,
                           more) is held


def test_rfc896_nagle_holds_while_anything_is_in_flight() -> None:
    assert tcp_nagle_check(True, SMALL_ACKED, 0, 1, NagleStyle.RFC896) \
        is Reason.NAGLE_HOLD_CLASSIC


@pytest.mark.parametrize(("cwnd", "in_flight", "fin_only", "quota"), [
    (10, 0, False, 5),      # one skb takes at most half the window
    (10, 8, False, 2),      # ... and at most what is free
    (10, 10, False, 0),     # full
    (10, 10, True, 1),      # a lone FIN always goes
    (1, 0, False, 1),
])
def test_cwnd_test(cwnd: int, in_flight: int, fin_only: bool, quota: int) -> None:
    assert tcp_cwnd_test(cwnd, in_flight, fin_only) == quota
