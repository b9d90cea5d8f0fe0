"""nagle_sim.scenario.generator and ``validate --random``: generated scenarios are valid, run to
the end on the model, are the same for the same seed, and the command's options fail with
one line. The kernel side is tests/realnet/test_random_validate.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from nagle_sim.scenario import loads
from nagle_sim.scenario.generator import MAX_SEED, random_scenario
from nagle_sim.sim.driver import run_sim
from nagle_sim.trace import Outcome


def test_the_same_seed_is_the_same_scenario_and_seeds_differ() -> None:
    assert random_scenario(42) == random_scenario(42)
    texts = {random_scenario(seed).text for seed in range(50)}
    assert len(texts) == 50


@pytest.mark.parametrize("seed", range(0, 400, 3))
def test_every_generated_scenario_loads_and_runs_to_the_end(seed: int) -> None:
    """Safe to run for real: each round's reads match the other side's writes, so the
    model finishes every one (no deadlock, no time limit) within a few simulated seconds."""
    rs = random_scenario(seed)
    trace = run_sim(loads(rs.text, f"<random {seed}>"))
    assert trace.outcome is Outcome.OK, (seed, trace.message, rs.text)
    assert trace.segments[-1].t < 5_000_000


def test_the_generator_covers_every_option_it_names() -> None:
    """Across 200 seeds each style, rate, delay and NODELAY side appears, and the summary
    names what the text does."""
    seen: set[str] = set()
    for seed in range(200):
        rs = random_scenario(seed)
        for word, token in (("MSG_MORE", " more\n"), ("corked", "set cork on"),
                            ("writev", "writev "), ("QUICKACK", "set quickack on"),
                            ("1mbit", 'rate = "1mbit"'), ("10mbit", 'rate = "10mbit"'),
                            ("client NODELAY", "[client]\nnodelay = true"),
                            ("server NODELAY", "[server]\nnodelay = true")):
            assert (word in rs.summary) == (token in rs.text), (seed, word, rs.summary)
            if word in rs.summary:
                seen.add(word)
        if "delay_ms = 0\n" in rs.text:
            seen.add("loopback")
    assert seen == {"MSG_MORE", "corked", "writev", "QUICKACK", "1mbit", "10mbit",
                    "client NODELAY", "server NODELAY", "loopback"}


def test_a_seed_outside_the_range_is_refused() -> None:
    with pytest.raises(ValueError, match="outside"):
        random_scenario(-1)
    with pytest.raises(ValueError, match="outside"):
        random_scenario(MAX_SEED + 1)


@pytest.mark.parametrize(("argv", "says"), [
    (["--random", "0"], "--random: '0' is not between 1 and 1000"),
    (["--random", "1001"], "--random: '1001' is not between 1 and 1000"),
    (["--random", "2", "--seed", "-1"], "--seed: expected a whole number"),
    (["--random", "2", "--seed", "١٢"], "--seed: expected a whole number"),
    (["--random", "2", "--seed", "9" * 30], "--seed: expected a whole number"),
    (["--random", "2", "--seed", str(MAX_SEED)], "runs past the last seed"),
    (["--seed", "4"], "--seed and --keep go with --random N"),
    (["--keep", "/tmp"], "--seed and --keep go with --random N"),
    (["--random", "2", "--keep", "/nonexistent-dir"], "not a directory"),
])
def test_validate_random_options_fail_with_one_line(
        argv: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    from nagle_sim.__main__ import main

    try:
        code = main(["validate", *argv])
    except SystemExit as exc:     # argparse's own errors
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err
    assert len([line for line in err.splitlines() if line.startswith("error:")]) == 1


def test_a_keep_dir_that_cannot_be_written_is_refused_before_any_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from nagle_sim.__main__ import main

    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        import os
        if os.access(locked, os.W_OK):    # root writes anyway: use a file as the "dir"
            locked = tmp_path / "afile"
            locked.write_text("")
        code = main(["validate", "--random", "1", "--keep", str(locked)])
    finally:
        (tmp_path / "locked").chmod(0o700)
    assert code == 2
    assert "--keep" in capsys.readouterr().err
