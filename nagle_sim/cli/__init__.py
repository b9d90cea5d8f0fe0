"""The `nagle-sim` command line: one module per command, sharing one option vocabulary.

- `main`: parse, run, and turn a `nagle_sim.errors.UserError` into one line and its exit
  code; how a command process ends. `messages`: that one error line.
- `parser`: the command table (`parser.COMMANDS`) and the lazily filled parser: a command
  imports its module only when it runs or shows its help.
- `options`: option types (bounded numbers, widths, tokens…) and option groups (a scenario
  with ``--set``/``--param``, the ladder view, a remote serve), and early checks (an
  output path, a profile name).
- a module per command or family of commands: `run` (run, show), `app` (tui, serve,
  lessons), `handout`, `examples`, `export`, `compare` (compare, validate), `sweep`,
  `explain`, `drill`, `realnet` (run, serve, cleanup), `watch`, `wireshark`;
- serve's classroom processes: `forkserver` (one started app forked for each browser tab)
  and `forktemplate` (the app it forks, laid out and following the class).

argparse is imported here and in process entry points only (``python -m realnet``, the
relay, realnet's watchdog, ``python -m realnet.watch`` and its demo and build programs;
`nagle_sim.__main__` only calls `nagle_sim.cli.main`). Commands get their executors from
`nagle_sim.runners`, never from `nagle_sim.sim` or `realnet` directly.
"""
