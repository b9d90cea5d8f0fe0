"""Scenario files: the format, and one-line errors naming file, line/key and problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from nagle_sim import scenario
from nagle_sim.scenario import Read, Repeat, ScenarioError, Sleep, Write, Writev


def load_text(tmp_path: Path, text: str, *overrides: str) -> scenario.Scenario:
    path = tmp_path / "s.toml"
    path.write_text(text)
    return scenario.load(path, list(overrides))


def error_of(tmp_path: Path, text: str, *overrides: str) -> str:
    with pytest.raises(ScenarioError) as info:
        load_text(tmp_path, text, *overrides)
    message = str(info.value)
    assert "\n" not in message
    assert str(tmp_path / "s.toml") in message or message.startswith("--set")
    return message


def test_defaults_and_full_format(tmp_path: Path) -> None:
    s = load_text(tmp_path, '''
title = "t"
[link]
delay_ms = 2.5
to_client_delay_ms = 0
mss = 1000
[client]
profile = "linux-5.4"
nodelay = true
script = """
repeat 2 {
  write 6 # a comment
  write 7 more; writev 1 2 3
}
read 13
sleep 1.5ms
"""
[server]
script = "repeat 2 { read 13; write 13 }"
''')
    assert s.link.to_server_delay == 2500 and s.link.to_client_delay == 0 and s.link.mss == 1000
    assert s.client.profile.name == "linux-5.4" and s.client.options.nodelay
    assert s.server.profile.name == "linux" and not s.server.options.cork
    rep, read, sleep = s.client.script
    assert isinstance(rep, Repeat) and rep.count == 2
    assert rep.body == (Write(12, 6), Write(13, 7, more=True), Writev(13, (1, 2, 3)))
    assert read == Read(15, 13) and sleep == Sleep(16, 1500)


@pytest.mark.parametrize(("text", "fragment"), [
    ("[link]\ndelay_ms = -1\n", ":2: link.delay_ms: must be ≥ 0"),
    ("[client]\nnodelay = 1\n", ":2: client.nodelay: expected true or false"),
    ("[client]\nprofile = \"beos\"\n", "client.profile: unknown profile 'beos'"),
    ("[server]\nspeed = 3\n", "server.speed: unknown key"),
    ("[client]\nscript = \"write -3\"\n", ":2: write size must be > 0, got -3"),
    ("[client]\nscript = \"\"\"\nwrite 1\nfly 2\n\"\"\"\n", ":4: unknown statement 'fly'"),
    ("[client]\nscript = \"repeat 3 { write 1\"\n", "never closed"),
    ("[client]\nscript = \"sleep 10\"\n", "bad duration '10'"),
    ("[client]\nscript = \"set nagle on\"\n", "use 'set nodelay|cork|quickack on|off'"),
    ("title = \n", ":1: invalid TOML"),
    ("[client]\nprofile = \"windows\"\nscript = \"set cork on\"\n", ":3: client profile "
     "'windows' has no TCP_CORK"),
    ("[client]\ntune = { hz = 0 }\n", "client.tune.hz: must be from 1"),
    ("[client]\ntune = { hz = 2000000 }\n", "client.tune.hz: HZ must be between"),
    ("[client]\ntune = { initial_rcv_mss = 0 }\n", "initial_rcv_mss: must be from 1"),
    ("[link]\nmss = nan\n", ":2: link.mss: expected a finite number, got nan"),
    ("[link]\ndelay_ms = inf\n", "link.delay_ms: expected a finite number"),
    ("[link]\ntx_complete_us = -inf\n", "link.tx_complete_us: expected a finite number"),
    ("[client]\nscript = \"sleep 99999999999s\"\n", "longer than ten days"),
    ("[client]\nscript = \"sleep 1" + "0" * 400 + "s\"\n", "bad duration"),
    ("[client]\nscript = \"write 1" + "0" * 5000 + "\"\n",
     "write size 1000000000000000… is too large"),
    ("[client]\nscript = \"write \u0661\u0662\"\n", "write size must be a whole number"),
    ("[client]\nscript = \"close; write 5\"\n", ":2: client: 'write' after 'close'"),
    ("[client]\nscript = \"repeat 2 { write 1; close }\"\n", ":2: client: 'write' after 'close'"),
    ("[client]\nscript = \"repeat 2 { repeat 1 { sleep 1ms; read 1 }; close }\"\n",
     ":2: client: 'read' after 'close'"),     # the loop's second pass, one level down
    ("[client]\nscript = \"repeat 3 { sleep 1ms; close }\"\n",
     ":2: client: 'close' after 'close'"),
    ("[client]\nscript = \"repeat 1 { close }; repeat 2 { sleep 1ms }; write 1\"\n",
     ":2: client: 'write' after 'close'"),
    ("[client]\nscript = \"repeat 1000000000 { }\"\n", "statements and loop iterations"),
    ("[client]\nscript = \"writev " + "1 " * 1025 + "\"\n", "at most 1024 sizes (IOV_MAX)"),
    ("[client]\ntune = { colour = 1 }\n", "not a tunable profile field"),
    ("[link]\nmss = 20\n", "link.mss: must be ≥ 88"),
    ("[client]\nscript = \"repeat 100000 { repeat 100000 { write 1 } }\"\n", "statements"),
])
def test_bad_input_gives_one_line_naming_the_place(tmp_path: Path, text: str,
                                                   fragment: str) -> None:
    assert fragment in error_of(tmp_path, text)


@pytest.mark.parametrize("script", [
    "close; sleep 1ms; repeat 0 { write 1 }",
    "repeat 1 { write 1; close }; sleep 1ms",
    "repeat 0 { close }; write 1",
    "repeat 2 { write 1 }; repeat 1 { repeat 1 { close } }; sleep 2ms",
])
def test_close_rules_allow_what_runs_before_close_or_never(tmp_path: Path,
                                                           script: str) -> None:
    """The iterative close check accepts exactly what the execution order allows."""
    assert load_text(tmp_path, f'[client]\nscript = "{script}"\n').client.script


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="no such file"):
        scenario.load(tmp_path / "nope.toml")
    with pytest.raises(ScenarioError, match="is a directory"):
        scenario.load(tmp_path)


def test_overrides_set_nested_keys(tmp_path: Path) -> None:
    s = load_text(tmp_path, "", "client.nodelay=true", "link.delay_ms=5",
                  'server.script="read 1"', "server.tune.hz=1000")
    assert s.client.options.nodelay and s.link.to_server_delay == 5000
    assert s.server.script == (Read(1, 1),) and s.server.profile.hz == 1000


def test_bad_override_is_reported(tmp_path: Path) -> None:
    assert "use KEY=VALUE" in error_of(tmp_path, "", "client.nodelay")


def test_sleep_after_close_is_allowed(tmp_path: Path) -> None:
    s = load_text(tmp_path, '[client]\nscript = "write 1; close; sleep 5ms"\n')
    assert len(s.client.script) == 3


# ---------------------------------------------------------------- profiles, options, link
def test_congestion_side_key_and_set_override() -> None:
    sc = scenario.loads('[client]\ncongestion = "reno"\n', "<t>", ["server.congestion=bbr"])
    assert (sc.client.profile.congestion, sc.server.profile.congestion) == ("reno", "bbr")
    assert sc.client.tune == {"congestion": "reno"}
    assert scenario.real_run_caveats(sc) == []     # realnet sets it per socket


def test_congestion_is_not_a_tune_field() -> None:
    with pytest.raises(ScenarioError, match="not a tunable"):
        scenario.loads('[client]\ntune = { congestion = "bbr" }\n', "<t>")


def test_pingpong_thresh_tune_is_real_runnable_but_hystart_is_not() -> None:
    sc = scenario.loads("[server]\ntune = { pingpong_thresh = 3, hystart = false }\n", "<t>")
    (note,) = scenario.real_run_caveats(sc)
    assert "hystart" in note and "pingpong_thresh" not in note


def test_a_modelled_device_queue_is_not_real_runnable() -> None:
    """validate says n/a, not DISAGREE, for autocork behind a device queue: this machine's
    loopback and TUN links complete every packet at once (S5 lesson)."""
    assert scenario.real_run_caveats(scenario.loads("[link]\ntx_complete_us = 0\n", "<t>")) == []
    (note,) = scenario.real_run_caveats(scenario.loads("[link]\ntx_complete_us = 20\n", "<t>"))
    assert "device queue" in note and "tx_complete_us" in note


def test_version_profiles_load_and_old_ones_refuse_timing_options() -> None:
    for name in ("linux-6.6", "linux-6.1", "linux-5.15", "linux-5.4", "linux-4.18"):
        sc = scenario.loads(f'[client]\nprofile = "{name}"\n', "<t>")
        assert sc.client.profile.name == name
        with pytest.raises(ScenarioError, match="6.15"):
            scenario.loads(f'[client]\nprofile = "{name}"\nscript = "set rto_min 50ms"\n',
                           "<t>")


def test_link_rate_units_and_defaults() -> None:
    for text, bps in (('"1mbit"', 1_000_000), ('"256kbit"', 256_000), ('"1.5 gbit"',
                      1_500_000_000), ("64000", 64_000)):
        link = scenario.loads(f"[link]\nrate = {text}\n", "<t>").link
        assert link.rate_bps == bps and link.queue == 1000
    plain = scenario.loads("", "<t>").link
    assert plain.rate_bps == 0 and not plain.quickack and plain.gso
    assert not scenario.loads('[link]\nrate = "1mbit"\n', "<t>").link.gso, \
        "a rate-limited link is emulated through TUN devices"


def test_link_quickack_sets_both_profiles() -> None:
    sc = scenario.loads("[link]\nquickack = true\n", "<t>")
    assert sc.client.profile.route_quickack and sc.server.profile.route_quickack
    with pytest.raises(ScenarioError, match="not a tunable"):
        scenario.loads("[client]\ntune = { route_quickack = true }\n", "<t>")


@pytest.mark.parametrize("profile", ["windows", "freebsd", "macos"])
def test_linux_only_knobs_are_refused_on_other_stacks(profile: str) -> None:
    """Review of issue 11: a Windows, FreeBSD or macOS side accepted `set delack_max`,
    `set rto_min` and a quick-ACK route and then ignored them."""
    for text in (f'[server]\nprofile = "{profile}"\nscript = "set delack_max 5ms"\n',
                 f'[client]\nprofile = "{profile}"\nscript = "set rto_min 50ms"\n',
                 f'[link]\nquickack = true\n[server]\nprofile = "{profile}"\n'):
        with pytest.raises(ScenarioError) as err:
            scenario.loads(text, "<t>")
        assert profile in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(("link", "emulated"), [
    ("", False),
    ("[link]\ndelay_ms = 1\n", True),
    ('[link]\nrate = "1mbit"\n', True),
    ("[link]\ndrop = [\"to_server data 3\"]\n", True),
])
def test_one_rule_says_which_links_realnet_emulates_and_the_model_agrees(
        link: str, emulated: bool) -> None:
    """realnet runs a link with a delay, a rate or scripted faults over TUN devices, any
    other over 127.0.0.1; the model's loopback rules (a sending call waits for the peer's
    reaction) follow the same rule, not one of their own."""
    from nagle_sim.sim.driver import SimDriver

    sc = scenario.loads(link + '[client]\nscript = "write 1"\n[server]\nscript = "read 1"\n',
                        "l.toml")
    assert sc.link.emulated is emulated
    assert SimDriver(sc)._loopback is not emulated
