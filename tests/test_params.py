"""Scenario parameters: `[params]` defaults, `{name}` substitution, choices, `--param`,
and the errors for unknown and unused parameters (each naming file and line)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nagle_sim import scenario
from nagle_sim.scenario import ScenarioError
from nagle_sim.scenario.steps import steps

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

BASE = '''
[params]
n = 3
pause = "5ms"
delay = 2.5

[link]
delay_ms = "{delay}"

[client]
script = "repeat {n} { write 10; sleep {pause} }; read 1"

[server]
script = "read {n}0; write 1"
'''


def _ops(sc: scenario.Scenario) -> list[tuple[str, str]]:
    return [(step.op, step.arg) for step in steps(sc.client.script)]


def test_defaults_are_substituted_with_their_types() -> None:
    sc = scenario.loads(BASE, "p.toml")
    assert sc.link.to_server_delay == 2500       # "{delay}" stayed a number
    assert _ops(sc).count(("sleep", "5ms")) == 3
    assert scenario.describe(sc.server.script[0]) == ("read", "30")


def test_a_param_override_replaces_the_default() -> None:
    sc = scenario.loads(BASE, "p.toml", ["params.n=5", "params.pause=1ms"])
    assert _ops(sc).count(("write", "10")) == 5
    assert ("sleep", "1ms") in _ops(sc)
    assert scenario.describe(sc.server.script[0]) == ("read", "50")


@pytest.mark.parametrize("text, overrides, message", [
    (BASE.replace("{pause}", "{paws}"), [], r"p\.toml:11: unknown parameter 'paws'"),
    (BASE.replace("sleep {pause}", "sleep 1ms"), [], r"p\.toml:4: params: 'pause' is never used"),
    (BASE.replace("n = 3", "n = 3\nm = 1"), [], r"p\.toml:4: params: 'm' is never used"),
    (BASE, ["params.speed=3"], r"--param speed: p\.toml declares no parameter 'speed'"),
    (BASE.replace('pause = "5ms"', "pause = [1, 2]"), [], "must be a string, number"),
    (BASE.replace("n = 3", '"2x" = 3'), [], "a parameter name is letters"),
    ("params = 3\n[client]\nscript='write 1'", [], "params must be a table"),
], ids=["unknown", "unused", "unused-line", "undeclared-override", "list-value", "bad-name",
        "not-a-table"])
def test_parameter_errors_name_file_and_line(text: str, overrides: list[str],
                                             message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        scenario.loads(text, "p.toml", overrides)


def test_without_params_braces_are_left_alone() -> None:
    sc = scenario.loads("[client]\nscript = 'repeat 2 {write 1}'\n[server]\nscript='read 2'",
                        "b.toml")
    assert len(sc.client.script) == 1


def test_a_param_given_to_a_scenario_without_params_is_an_error() -> None:
    with pytest.raises(ScenarioError, match="declares no parameter 'n'"):
        scenario.loads("[client]\nscript = 'write 1'", "b.toml", ["params.n=1"])


CHOICE = '''
[params]
[params.mode]
default = "plain"
plain = { setup = "", message = "write 2" }
cork = { setup = "set cork on", message = "write 2; set cork off" }

[client]
script = "{setup}\\n{message}"
[server]
script = "read 2"
'''


def test_a_choice_sets_several_parameters() -> None:
    plain = scenario.loads(CHOICE, "c.toml")
    cork = scenario.loads(CHOICE, "c.toml", ["params.mode=cork"])
    assert [op for op, _ in _ops(plain)] == ["write"]
    assert [op for op, _ in _ops(cork)] == ["set", "write", "set"]


def test_choice_entries_use_plain_parameters_and_prose_keeps_its_braces() -> None:
    text = CHOICE.replace('default = "plain"', 'default = "plain"').replace(
        'plain = { setup = "", message = "write 2" }',
        'plain = { setup = "", message = "repeat {n} { write 2 }" }').replace(
        "[params]\n", "title = \"a {literal} title\"\n[params]\nn = 4\n").replace(
        'script = "read 2"', 'script = "read {n}"')
    sc = scenario.loads(text, "c.toml")
    assert sc.title == "a {literal} title"
    assert [op for op, _ in _ops(sc)] == ["write"] * 4


def test_a_bad_choice_names_its_own_table_line() -> None:
    with pytest.raises(ScenarioError, match=r"c\.toml:3: params\.mode: choose one of"):
        scenario.loads(CHOICE, "c.toml", ["params.mode=fast"])


def test_a_choice_outside_its_entries_names_them() -> None:
    with pytest.raises(ScenarioError, match=r"params\.mode: choose one of plain, cork, got "
                                            r"'fast'"):
        scenario.loads(CHOICE, "c.toml", ["params.mode=fast"])


def test_param_on_the_command_line(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(BASE)
    run = [sys.executable, "-m", "nagle_sim", "run", str(path), "--limit", "0"]
    ok = subprocess.run([*run, "--param", "n=4"], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert "4 with data" in ok.stdout
    bad = subprocess.run([*run, "--param", "m=4"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "declares no parameter 'm'" in bad.stderr
    assert "Traceback" not in bad.stderr


@pytest.mark.parametrize("name", ["s3.toml", "s5.toml"])
def test_examples_load_with_every_choice(name: str) -> None:
    path = EXAMPLES / name
    sc = scenario.load(path)
    assert sc.client.script
    if name == "s3.toml":
        for mode in ("plain", "nodelay", "cork"):
            scenario.load(path, [f"params.mode={mode}", "params.messages=3"])


def _many_params(count: int) -> str:
    names = [f"p{i}" for i in range(count)]
    return ("[params]\n" + "".join(f"{n} = {i + 1}\n" for i, n in enumerate(names))
            + "[client]\nscript = '''\n" + "".join(f"write {{{n}}}\n" for n in names)
            + "'''\n[server]\nscript = 'read 1'\n")


def test_checking_params_does_not_scan_the_file_per_parameter(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 29.3: finding a parameter's declaration line is a pass over the whole file;
    it was done for every parameter, error or not (4000 parameters: 18 s, 20,000: over
    150 s). Now only an error looks for its line, so checking is linear in the file."""
    from nagle_sim.scenario import params
    calls: list[str] = []
    real = params._declared_at

    def counted(where: str, text: str, name: str) -> str:
        calls.append(name)
        return real(where, text, name)

    monkeypatch.setattr(params, "_declared_at", counted)
    sc = scenario.loads(_many_params(2000), "p.toml")
    assert len(list(steps(sc.client.script))) == 2000
    assert calls == []
    # an error still names the declaring line, looked up once
    with pytest.raises(ScenarioError, match=r"p\.toml:2001: params: 'p1999' is never used"):
        scenario.loads(_many_params(2000).replace("write {p1999}", "write 1"), "p.toml")
    assert calls == ["p1999"]


def test_an_error_among_thousands_of_params_stays_one_short_line() -> None:
    text = _many_params(5000).replace("write {p7}", "write {nope}")
    with pytest.raises(ScenarioError) as err:
        scenario.loads(text, "p.toml")
    message = str(err.value)
    assert "unknown parameter 'nope'" in message and "4992 more" in message
    assert len(message) < 300 and "\n" not in message
