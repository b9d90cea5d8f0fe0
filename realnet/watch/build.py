"""Reproducible build of nagle_watch.bpf.o from bpf/nagle_watch.bpf.c.

    python -m realnet.watch.build           # rebuild the shipped object and its manifest
    python -m realnet.watch.build --check   # rebuild in a scratch dir; exit 1 if it differs

Owns: the one compiler command line (clang from the distribution, target BPF, CO-RE
debug info, file paths mapped to ``.`` so the object does not depend on where the
checkout is), stripping DWARF (the BTF the loader needs stays), and the manifest
(``nagle_watch.bpf.json``: the source files' SHA-256, the compiler's version, the
object's SHA-256). The package ships the object, so ``pip install`` needs no compiler;
tests/watch/test_build.py checks the manifest against the sources everywhere and, where
the same clang is installed, that a rebuild is byte-identical.

Must not import anything but the standard library.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Final

HERE: Final = Path(__file__).resolve().parent
SOURCE_DIR: Final = HERE / "bpf"
SOURCES: Final = ("nagle_watch.bpf.c", "nagle_watch.h")
OBJECT: Final = HERE / "nagle_watch.bpf.o"
MANIFEST: Final = HERE / "nagle_watch.bpf.json"
CLANG_MAJOR: Final = 14
"""The clang the shipped object was built with (Debian 12's ``clang``): another major
version compiles the same program into different (equally valid) bytes."""


class BuildError(Exception):
    pass


def _tool(*names: str) -> str:
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    raise BuildError(f"{names[0]} not found (apt-get install clang llvm libbpf-dev)")


def clang_version(clang: str) -> str:
    out = subprocess.run([clang, "--version"], capture_output=True, text=True, check=True)
    return out.stdout.splitlines()[0].strip()


def multiarch_include() -> list[str]:
    """Debian keeps <asm/types.h> under /usr/include/<triplet>; <linux/bpf.h> needs it."""
    try:
        triplet = subprocess.run(["gcc", "-print-multiarch"], capture_output=True,
                                 text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        triplet = ""
    inc = Path("/usr/include") / triplet if triplet else None
    return [f"-I{inc}"] if inc and inc.is_dir() else []


def source_digest(src_dir: Path = SOURCE_DIR) -> dict[str, str]:
    return {name: hashlib.sha256((src_dir / name).read_bytes()).hexdigest()
            for name in SOURCES}


def compile_object(out: Path, src_dir: Path = SOURCE_DIR) -> str:
    """Compile and strip into ``out``; returns the compiler's version line."""
    clang = _tool(f"clang-{CLANG_MAJOR}", "clang")
    strip = _tool(f"llvm-strip-{CLANG_MAJOR}", "llvm-strip")
    version = clang_version(clang)
    with tempfile.TemporaryDirectory(prefix="nagle-watch-build-") as tmp:
        work = Path(tmp)
        for name in SOURCES:
            shutil.copyfile(src_dir / name, work / name)
        cmd = [clang, "-O2", "-g", "-target", "bpfel", "-mcpu=v3", "-Wall", "-Werror",
               "-fno-ident", f"-ffile-prefix-map={work}=.", "-I.", *multiarch_include(),
               "-c", "nagle_watch.bpf.c", "-o", "nagle_watch.bpf.o"]
        done = subprocess.run(cmd, cwd=work, capture_output=True, text=True, check=False)
        if done.returncode:
            raise BuildError("clang failed:\n" + done.stderr)
        done = subprocess.run([strip, "-g", "nagle_watch.bpf.o"], cwd=work,
                              capture_output=True, text=True, check=False)
        if done.returncode:
            raise BuildError("llvm-strip failed:\n" + done.stderr)
        shutil.copyfile(work / "nagle_watch.bpf.o", out)
    return version


def manifest(obj: Path, version: str, src_dir: Path = SOURCE_DIR) -> dict[str, object]:
    return {"object": obj.name, "object_sha256": hashlib.sha256(obj.read_bytes()).hexdigest(),
            "sources_sha256": source_digest(src_dir), "compiler": version,
            "command": "python -m realnet.watch.build"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m realnet.watch.build", description=__doc__
                                 .split("\n\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="rebuild in a scratch directory and compare with the shipped object")
    args = ap.parse_args(argv)
    try:
        if args.check:
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / OBJECT.name
                version = compile_object(out)
                same = out.read_bytes() == OBJECT.read_bytes()
                shipped = json.loads(MANIFEST.read_text())
                print(f"rebuilt with {version}; shipped object built with "
                      f"{shipped.get('compiler')}: {'identical' if same else 'DIFFERENT'}")
                return 0 if same else 1
        version = compile_object(OBJECT)
        MANIFEST.write_text(json.dumps(manifest(OBJECT, version), indent=1) + "\n")
        print(f"wrote {OBJECT.name} ({OBJECT.stat().st_size} bytes) with {version}")
        return 0
    except (BuildError, OSError, subprocess.CalledProcessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
