"""The executor seam: the one module that imports the executors.

Owns: how a scenario becomes a trace — the simulator (`nagle_sim.sim`), real sockets
(`realnet`, on this host or with the server side on a remote serve) — and why a real run
cannot work on this host. Everything that runs scenarios (the command line, the app,
compare, sweep, explain, lessons' claims) receives runners from here instead of importing
an executor; `lint-imports` holds that (pyproject.toml).

Both executors are imported inside the functions that use them: ``--version``, ``serve``
or ``lessons`` import neither, and a host without realnet's requirements still simulates.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import UserError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from realnet.watch.session import Result as WatchResult

    from .scenario import Scenario
    from .trace import ModelRunner, Runner, Trace


def simulate(scenario: Scenario, /, **options: Any) -> Trace:
    """The simulator's run of ``scenario`` (`nagle_sim.sim.driver.run_sim`'s options:
    ``record_limit``, ``time_limit``, ``cancelled``, ``sleeps``)."""
    from .sim.driver import run_sim
    return run_sim(scenario, **options)


def classroom_simulator() -> ModelRunner:
    """`simulate` bounded for one browser tab of a class: a run stops at the driver's
    ``CLASSROOM_RECORD_LIMIT`` records (~200 MB), so one student's scenario cannot take
    the class's memory."""
    from functools import partial

    from .sim.driver import CLASSROOM_RECORD_LIMIT
    return partial(simulate, record_limit=CLASSROOM_RECORD_LIMIT)


def real_unavailable(remote: str | None = None) -> str | None:
    """Why a real-socket run cannot work here, asked before running anything (None: it
    can). Without CAP_NET_RAW the run would succeed with an empty capture that looks like
    a valid measurement ("segments 67 → 0")."""
    try:
        from realnet.host import RealnetError, capture_unavailable, check_platform
    except ImportError as exc:
        return f"real-socket runs need the realnet package ({exc})"
    try:
        check_platform()
    except RealnetError as exc:
        return str(exc)
    if remote:
        return None  # the serve process captures on its own host
    why = capture_unavailable()
    return f"real-socket runs cannot capture packets here: {why}" if why else None


def real_runner() -> Runner | None:
    """realnet's executor when this host can run it (Linux, capture allowed), else None
    (the app then says why, from `real_unavailable`, instead of running)."""
    if real_unavailable() is not None:
        return None
    from realnet.runner import run_real
    return run_real


def real(remote: str | None = None, token: str | None = None, **options: Any) -> Runner:
    """A runner of real runs (the server side on ``remote`` if given) for many scenarios
    in turn (a sweep's cells); a `UserError` at once when this platform cannot run any
    (not Linux). A host without capture rights still runs: its traces say the wire is
    unknown, and their metrics read it so."""
    from functools import partial
    try:
        from realnet.runner import check_platform
        from realnet.runner import run_real as run
    except ImportError as exc:
        raise UserError(f"realnet is unavailable: {exc}") from None
    check_platform()
    return partial(run, remote=remote, token=token, **options)


def run_real(scenario: Scenario, remote: str | None = None, token: str | None = None,
             **options: Any) -> Trace:
    """The real run of ``scenario`` (the server side on ``remote`` if given); a
    `UserError` saying why when this host cannot run it."""
    why = real_unavailable(remote)
    if why is not None:
        raise UserError(why)
    try:
        from realnet.runner import run_real as run
    except ImportError as exc:
        raise UserError(f"realnet is unavailable: {exc}") from None
    return run(scenario, remote=remote, token=token, **options)


def serve_real(listen: str, *, token: str | None, no_auth: bool) -> int:
    """``nagle-sim realnet serve``: the server side of real runs for remote clients, until
    interrupted (`realnet.remote.serve_forever`)."""
    from realnet.remote import serve_forever
    return serve_forever(listen, token=token, no_auth=no_auth)


def remove_stale_real() -> list[str]:
    """Remove what real runs killed by SIGKILL left (namespaces, relays, temp files);
    the names removed (`realnet.cleanup.remove_stale`)."""
    from realnet.cleanup import remove_stale
    return remove_stale()


def watch_kernel(command: Sequence[str] | None = None, **options: Any) -> WatchResult:
    """``nagle-sim watch``: the kernel's own decisions for a program, a process or a port
    (`realnet.watch.session.run` with a `realnet.watch.loader.Config` built from
    ``options``: pids, port, ring_mb, rate, burst, segments; the session's own keyword
    options pass through). A `UserError` (one line, exit 2) when watch cannot run here."""
    try:
        from realnet.watch.loader import Config
        from realnet.watch.session import run
    except ImportError as exc:
        raise UserError(f"watch is unavailable: {exc}") from None
    config_keys = {"pids", "port", "ring_mb", "rate", "burst", "segments"}
    config = Config(**{k: v for k, v in options.items() if k in config_keys})
    if command is None:
        config.check()
    return run(config, command, **{k: v for k, v in options.items() if k not in config_keys})


def watch_check() -> int:
    """``nagle-sim watch --check``: does watch see each decision on this kernel? (the
    exit status of `realnet.watch.check.main`)."""
    from realnet.watch.check import main as check
    return int(check())


def watch_traces(result: WatchResult, command: Sequence[str] | None = None) -> list[Trace]:
    """The traces of a finished `watch_kernel` session that kept its sockets' segments
    and decisions: one per watched connection (`realnet.watch.trace`)."""
    from realnet.watch.trace import connection_traces
    if result.engine is None:
        return []
    return connection_traces(result.engine, host=result.host, stalls=result.stalls,
                             notes=result.notes, counters=result.counters,
                             command=command)
