"""``nagle-sim wireshark``: the Lua post-dissector that shows `explain --annotate` comments
as Wireshark fields.

Owns: where the plugin is installed (Wireshark's personal Lua plugins folder, as
``tshark -G folders`` reports it, else ~/.local/lib/wireshark/plugins) and copying it
there. The plugin itself is package data (`nagle_sim/explain/nagle_sim.lua`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ..errors import EXIT_OK, UserError

PLUGIN_NAME = "nagle_sim.lua"


def fill_wireshark(p: argparse.ArgumentParser) -> None:
    what = p.add_mutually_exclusive_group()
    what.add_argument("--install", action="store_true",
                      help="copy the plugin into Wireshark's personal Lua plugins folder")
    what.add_argument("--uninstall", action="store_true", help="remove it from there")
    what.add_argument("--path", action="store_true",
                      help="print the plugin's path in the installed package (for "
                           "tshark -X lua_script:PATH)")
    p.add_argument("--dir", metavar="DIR",
                   help="the plugins folder to use (default: Wireshark's personal one)")
    p.set_defaults(func=cmd_wireshark)


def plugin_source() -> Path:
    from ..explain.annotate import LUA_SCRIPT
    return LUA_SCRIPT


def personal_plugins() -> Path:
    """Wireshark's personal Lua plugins folder: what tshark says, else the default of
    Wireshark 3.x/4.x on Unix (~/.local/lib/wireshark/plugins)."""
    tshark = shutil.which("tshark")
    if tshark:
        try:
            done = subprocess.run([tshark, "-G", "folders"], capture_output=True, text=True,
                                  timeout=30, check=False)
            for line in done.stdout.splitlines():
                name, _, value = line.partition(":")
                if name.strip() == "Personal Lua Plugins" and value.strip():
                    return Path(value.strip())
        except (OSError, subprocess.SubprocessError):
            pass
    return Path(os.path.expanduser("~/.local/lib/wireshark/plugins"))


def cmd_wireshark(args: argparse.Namespace) -> int:
    source = plugin_source()
    if not source.is_file():
        raise UserError(f"the Wireshark plugin is missing from the installation ({source})")
    if args.path or not (args.install or args.uninstall):
        print(source)
        if not args.path:
            print("use it with: tshark -X lua_script:" + str(source) + " -r OUT.pcapng "
                  "-Y 'nagle_sim.cause == \"nagle\"'; or install it: nagle-sim wireshark "
                  "--install", file=sys.stderr)
        return EXIT_OK
    folder = Path(args.dir) if args.dir else personal_plugins()
    target = folder / PLUGIN_NAME
    try:
        if args.uninstall:
            if target.exists():
                target.unlink()
                print(f"removed {target}")
            else:
                print(f"{target} was not installed")
            return EXIT_OK
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    except OSError as exc:
        raise UserError(f"cannot write {target}: {exc.strerror or exc}") from None
    print(f"installed {target}")
    print("Wireshark and tshark now show nagle_sim.* fields on captures written by "
          "`nagle-sim explain CAPTURE --annotate OUT.pcapng`, e.g. "
          "tshark -r OUT.pcapng -Y 'nagle_sim.cause == \"nagle\"'")
    return EXIT_OK
