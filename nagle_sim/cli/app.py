"""The teaching app's commands: ``tui`` (also ``nagle-sim`` alone), ``serve`` and ``lessons``.

Owns: their options, and handing the app its runners (`nagle_sim.runners`): the simulator
always, realnet when this host can run it (else the reason, shown on ``r``), each bounded
for a classroom tab started by ``serve``.
"""

from __future__ import annotations

import argparse

from ..errors import EXIT_OK, UserError
from . import options


def cmd_tui(args: argparse.Namespace) -> int:
    try:
        from ..tui.app import run_app
        from ..tui.classroom import Classroom, queued_runner
    except ImportError as exc:  # pragma: no cover - only when textual is missing
        raise UserError(f"the TUI is unavailable: {exc}") from None
    from .. import runners
    blocker = runners.real_unavailable() or ""
    run_real = runners.real_runner() if not blocker else None
    run_sim = runners.simulate
    classroom = None
    class_link = None
    if getattr(args, "classroom", False):  # started by `nagle-sim serve`, one per tab
        from pathlib import Path

        from ..tui.classlink import ClassLink
        class_link = ClassLink.from_environment()  # serve's channel to the class, if any
        classroom = Classroom(allow_real=args.allow_real, real_timeout_s=args.real_timeout,
                              real_lock=Path(args.real_lock) if args.real_lock else None)
        if run_real is not None and args.allow_real:
            run_real = queued_runner(run_real, classroom)
        # one student's scenario may not take the class's memory: a tab's run stops at
        # CLASSROOM_RECORD_LIMIT records (~200 MB), and a superseded run is cancelled
        run_sim = runners.classroom_simulator()
    return run_app(None if classroom else getattr(args, "file", None), run_sim=run_sim,
                   run_real=run_real, classroom=classroom, real_blocker=blocker,
                   class_link=class_link)


def cmd_serve(args: argparse.Namespace) -> int:
    from ..tui.serve import ServeOptions, is_loopback, new_token, serve
    if args.public_url and not args.public_url.startswith(("http://", "https://")):
        raise UserError(f"serve --public-url {args.public_url!r}: must start with http:// "
                        "or https://")
    token = args.token
    if token is None and not is_loopback(args.host):
        token = new_token()  # open to a network: never without a key
    if args.teacher_token is not None and args.teacher_token == token:
        raise UserError("serve --teacher-token: must differ from the class token (anyone "
                        "with the class link would lead the class)")
    serve_options = ServeOptions(
        host=args.host, port=args.port, token=token, max_sessions=args.max_sessions,
        idle_s=args.idle_minutes * 60, allow_real=args.allow_real,
        real_timeout_s=args.real_timeout, public_url=args.public_url,
        teacher_token=args.teacher_token, start_method=args.start_method,
        warm=args.warm if args.warm is not None
        else (1 if is_loopback(args.host) else args.max_sessions))
    try:
        serve(serve_options)
    except OSError as exc:
        raise UserError(f"serve: cannot listen on {args.host}:{args.port}: "
                        f"{exc.strerror or exc}") from None
    return EXIT_OK


def cmd_lessons(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.text import Text

    from ..lessons import load_lessons
    console = Console()
    for lesson in load_lessons():
        console.print(Text.assemble((lesson.slug, "bold"), f"  {lesson.title}\n    "
                                    f"{lesson.summary}"))
    return EXIT_OK


def fill_tui(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", nargs="?")
    # set by `serve` for each browser tab (hidden: not for people)
    p.add_argument("--classroom", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--allow-real", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--real-lock", help=argparse.SUPPRESS)
    p.add_argument("--real-timeout", type=options.positive_float(600.0), default=20.0,
                   help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_tui)


def fill_serve(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only; "
                   "0.0.0.0 opens it to the class, with a token)")
    p.add_argument("--port", type=options.bounded_int(1, 65535), default=8000)
    p.add_argument("--token", type=options.class_token,
                   help="the class's key in the URL (default: random when not on loopback)")
    p.add_argument("--teacher-token", type=options.class_token, metavar="TOKEN",
                   help="the key of the teacher's page (default: random each start; it is "
                   "never derived from the class's)")
    p.add_argument("--max-sessions", type=options.bounded_int(1, 500), default=40,
                   help="browser sessions at once (default 40); more get a 'class is full' "
                   "page")
    p.add_argument("--idle-minutes", type=options.positive_float(24 * 60.0), default=20.0,
                   help="end a session after this long without input (default 20)")
    p.add_argument("--allow-real", action="store_true",
                   help="let students run scenarios on real sockets (one at a time)")
    p.add_argument("--real-timeout", type=options.positive_float(600.0), default=20.0,
                   metavar="S", help="wall-time bound of one real-socket run (default 20 s)")
    p.add_argument("--warm", type=options.bounded_int(0, 500), metavar="N",
                   help="app processes started ahead of students (default: --max-sessions "
                   "when open to a class, 1 on loopback; each ~50 MiB)")
    p.add_argument("--start-method", choices=("fork", "exec"), default="fork",
                   help="how each tab's app starts: forked from a process that has loaded "
                   "the app once (default, where the system can fork), or as a new "
                   "process each (slower, more memory)")
    p.add_argument("--public-url", metavar="URL",
                   help="the base URL students use, if not http://<this host>:<port>")
    p.set_defaults(func=cmd_serve)


def fill_lessons(p: argparse.ArgumentParser) -> None:
    p.set_defaults(func=cmd_lessons)
