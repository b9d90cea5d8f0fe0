"""The Textual front end: lessons, the ladder diagram, what-if toggles and classroom mode.

Owns everything under ``nagle_sim/tui``. It moves a cursor over finished `Trace`s and gets
its executors injected (``NagleApp(run_sim=..., run_real=...)``, runners the command line
gets from `nagle_sim.runners`). Must not import simpy, the simulator or realnet.
"""
