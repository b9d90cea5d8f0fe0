"""Issue 31.10: the README's example commands name files a wheel user did not have
(tests/data/…, examples/… exist only in a checkout); `nagle-sim examples` writes them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nagle_sim.__main__ import main

ROOT = Path(__file__).resolve().parents[1]


def test_examples_writes_every_file_the_readme_names(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    named = set(re.findall(r"nagle-sim [a-z ]+ (examples/[\w.]+\.toml)", readme))
    assert "examples/s1_write_write_read.toml" in named and "examples/s5.toml" in named
    assert "tests/data/" not in readme.split("## Layout")[0]
    monkeypatch.chdir(tmp_path)
    assert main(["examples"]) == 0
    for path in named:
        assert (tmp_path / path).is_file(), path
    assert main(["run", "examples/s1_write_write_read.toml"]) == 0
    # the drill line named tests/drill, which only a checkout has
    drilled = re.findall(r"nagle-sim drill (\S+)", readme.split("## Layout")[0])
    assert drilled and not [d for d in drilled if d.startswith("tests/")], drilled
    for folder in drilled:
        scripts = sorted((tmp_path / folder).glob("*.pkt"))
        assert len(scripts) >= 3, folder
        for script in scripts:       # copies of tests/drill's, kept in step by this check
            assert script.read_text() == (ROOT / "tests" / "drill" / script.name).read_text()
        assert main(["drill", folder]) == 0
    # a second run keeps what is there (a user's edits are never replaced)
    (tmp_path / "examples" / "s5.toml").write_text("# mine\n")
    capsys.readouterr()
    assert main(["examples"]) == 0
    assert "kept" in capsys.readouterr().out
    assert (tmp_path / "examples" / "s5.toml").read_text() == "# mine\n"


def test_examples_into_a_file_is_one_line_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "f").write_text("x")
    assert main(["examples", str(tmp_path / "f")]) == 2
    err = capsys.readouterr().err
    assert "f" in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
