"""Fixtures for the realnet (real-kernel) tests.

Owns: the `requires_root_netns` skip fixture and a session-wide check that no
realnet namespace or relay outlives the test session.

Must not import: textual, rich, simpy. realnet itself is imported lazily so that
collecting these tests on a non-Linux machine skips instead of erroring.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterator

import pytest


@functools.cache
def realnet_unavailable() -> str | None:
    """Why realnet tests cannot run here, or None if they can."""
    if not sys.platform.startswith("linux"):
        return "realnet tests need Linux (network namespaces, TUN, AF_PACKET)"
    if os.geteuid() != 0:
        return "realnet tests need root (netns, TUN and AF_PACKET need CAP_NET_ADMIN/RAW)"
    if not os.path.exists("/dev/net/tun"):
        return "realnet tests need /dev/net/tun"
    try:
        from pyroute2 import netns

        # Containers can be root yet forbid mount/unshare: probe for real.
        probe = f"nsim-probe-{os.getpid()}"
        netns.create(probe)
        netns.remove(probe)
    except Exception as e:  # any failure means "cannot run here"
        return f"cannot create a network namespace here: {e!r}"
    return None


@pytest.fixture(scope="session")
def requires_root_netns() -> None:
    """Skip the requesting test unless we are root on Linux with netns + TUN."""
    reason = realnet_unavailable()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="session", autouse=True)
def _no_realnet_leftovers() -> Iterator[None]:
    """After the whole session, nothing of ours may be left: neither resources
    owned by this pytest process nor stale ones of dead owners (e.g. from the
    SIGKILL test's child)."""
    yield
    if realnet_unavailable():
        return
    from realnet import cleanup

    mine = cleanup.list_ours(owner_pid=os.getpid())
    stale = cleanup.list_stale()
    assert not mine, f"realnet resources leaked by this session: {mine}"
    assert not stale, f"stale realnet resources left behind: {stale}"
