"""The Textual front end: lessons, the ladder diagram, what-if toggles and classroom mode.

Owns everything under ``nagle_sim/tui``. It moves a cursor over finished `Trace`s and gets
its executors injected (``NagleApp(run_sim=..., run_real=...)``). Must not import simpy or
realnet; only `run_app` imports the simulator driver, at call time.
"""
