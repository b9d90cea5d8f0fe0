"""``nagle-sim export``: a run (or a saved trace) as pcap, SVG / PNG ladders, a
time-sequence plot, tables or JSON (`nagle_sim.export`).

Owns: the command's options and the order of its checks: every output path is checked
before the run, so a bad path fails in a second, not after a long simulation.
"""

from __future__ import annotations

import argparse

from ..errors import EXIT_OK, UserError
from . import options

FORMATS = ("pcap", "svg", "png", "tseq", "markdown", "csv")


def cmd_export(args: argparse.Namespace) -> int:
    from .. import runners
    from ..export import check_targets, export_cli
    from ..model.events import Side
    from ..trace import Trace
    outputs = {"pcap": args.pcap, "svg": args.svg, "png": args.png, "tseq": args.tseq,
               "markdown": args.markdown, "csv": args.csv, "json": args.json_out}
    # bad output paths fail before a slow run, not after it
    check_targets({fmt: p for fmt, p in outputs.items() if p is not None})
    if options.is_trace_file(args.file):
        if args.real or args.overlay_real or args.set:
            raise UserError(f"{args.file}: a saved trace is exported as it is; --real, "
                            "--overlay-real and --set need a scenario file")
        trace, overlay = Trace.load(args.file), None
    else:
        scenario = options.load_scenario(args)
        trace = runners.run_real(scenario) if args.real else runners.simulate(scenario)
        overlay = (runners.run_real(scenario) if args.overlay_real and not args.real
                   else None)
    paths = export_cli(trace, **outputs, overlay=overlay, until_ms=args.until_ms,
                       linear=args.linear, sender=Side(args.sender),
                       png_scale=args.png_scale)
    if not paths:
        raise UserError("nothing to export: give at least one of --pcap --svg --png --tseq "
                        "--markdown --csv --json")
    for path in paths:
        print(f"wrote {path}")
    return EXIT_OK


def fill_export(p: argparse.ArgumentParser) -> None:
    options.add_scenario(p)
    p.add_argument("--real", action="store_true", help="export a real-socket run instead")
    p.add_argument("--overlay-real", action="store_true",
                   help="draw a real-socket run over the simulated ladder (SVG/PNG)")
    for name in FORMATS:
        p.add_argument(f"--{name}", metavar="PATH")
    p.add_argument("--json", dest="json_out", metavar="PATH")
    p.add_argument("--until-ms", type=options.positive_float(1e9), metavar="MS",
                   help="draw pictures only up to this time (long runs are tall)")
    p.add_argument("--linear", action="store_true",
                   help="draw time to scale instead of compressing quiet gaps")
    p.add_argument("--sender", choices=("client", "server"), default="client",
                   help="whose data the time-sequence plot shows (default client)")
    p.add_argument("--png-scale", type=options.png_scale, default=1.0, metavar="X",
                   help="scale PNG pictures, 0.25 to 8 (default 1.0)")
    p.set_defaults(func=cmd_export)
