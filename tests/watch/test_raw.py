"""The record layout: realnet.watch.raw against the C header, as a C compiler lays it out."""

import shutil
import subprocess
from dataclasses import fields
from pathlib import Path

import pytest

from realnet.watch import raw

HEADER = Path(raw.__file__).parent / "bpf" / "nagle_watch.h"


def test_round_trip():
    e = raw.RawEvent(*([0] * (len(fields(raw.RawEvent)) - 3)), b"\0" * 16, b"\0" * 16,
                     b"wwr\0" + b"\0" * 12)
    e.type, e.snd_sml, e.snd_una, e.snd_nxt = raw.SEND, 106, 100, 106
    back = raw.RawEvent.decode(e.encode())
    assert back == e and back.command == "wwr" and back.sml_unacked == 6
    assert back.minshall_unacked


def test_layout_matches_the_c_header(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to lay out struct nw_event")
    names = [f.name for f in fields(raw.RawEvent)]
    prog = tmp_path / "layout.c"
    lines = ["#include <stdio.h>", "#include <stddef.h>", "#include <linux/types.h>",
             f'#include "{HEADER}"', "int main(void) {",
             'printf("size %zu\\n", sizeof(struct nw_event));']
    lines += [f'printf("{n} %zu\\n", offsetof(struct nw_event, {n}));' for n in names]
    lines += ["return 0; }"]
    prog.write_text("\n".join(lines))
    exe = tmp_path / "layout"
    subprocess.run([cc, str(prog), "-o", str(exe)], check=True)
    out = dict(line.split() for line in subprocess.run(
        [str(exe)], capture_output=True, text=True, check=True).stdout.splitlines())
    assert int(out["size"]) == raw.RECORD_SIZE
    # the Python offsets, from the struct format, field by field
    import struct
    fmt = raw._FORMAT.lstrip("<")
    codes = []
    for part in __import__("re").findall(r"(\d*)([a-zA-Z])", fmt):
        count, code = int(part[0] or 1), part[1]
        if code == "s":
            codes.append(f"{count}s")
        elif code != "x":
            codes.extend([code] * count)
    offset = 0
    for name, code in zip(names, codes, strict=True):
        assert int(out[name]) == offset, name
        offset += struct.calcsize("<" + code)
