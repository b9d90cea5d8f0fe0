"""Example scenarios (data), installed as the package ``nagle_sim.example_files`` so that
``nagle-sim examples`` can write them out for a user who installed the wheel: the README's
commands name these files (tests/data's seed files link here). Not imported as
``examples``."""
