"""Terminal reports, drawn with rich: a run (the ladder and its summary), a comparison,
a validation, a sweep.

- `terminal`: ``nagle-sim run`` / ``show``: the client | wire | server ladder from the
  trace's rows (`nagle_sim.trace.rows`) and the run's summary;
- `compare`: ``nagle-sim compare`` and ``validate``: the segment, iteration and stall
  tables, notes and differences, the verdict, the validation tables;
- `sweep`: ``nagle-sim sweep``'s table.

Explain's terminal report stays with the explain pipeline (`nagle_sim.explain.report`).
Imports the hubs and the features whose results it draws; must not import textual, simpy
or an executor.
"""
