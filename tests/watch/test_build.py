"""The shipped object is the build of the sources in the repository."""

import json
import shutil
import subprocess

import pytest

from realnet.watch import build


def test_manifest_matches_the_sources_and_the_object():
    man = json.loads(build.MANIFEST.read_text())
    assert man["sources_sha256"] == build.source_digest(), (
        "bpf/ sources changed without `python -m realnet.watch.build`")
    import hashlib
    assert man["object_sha256"] == hashlib.sha256(build.OBJECT.read_bytes()).hexdigest()


def test_a_rebuild_is_byte_identical(tmp_path):
    clang = shutil.which(f"clang-{build.CLANG_MAJOR}") or shutil.which("clang")
    if clang is None:
        pytest.skip("clang is not installed (CI installs it: apt-get install clang llvm "
                    "libbpf-dev)")
    version = build.clang_version(clang)
    if f"version {build.CLANG_MAJOR}." not in version:
        pytest.skip(f"{version}: the object was built with clang {build.CLANG_MAJOR}; "
                    "another major version makes different (valid) bytes")
    out = tmp_path / "o.bpf.o"
    build.compile_object(out)
    assert out.read_bytes() == build.OBJECT.read_bytes()


def test_the_object_has_every_hook_the_loader_names():
    from realnet.watch.loader import HOOKS
    obj = build.OBJECT.read_bytes()
    for h in HOOKS:
        assert h.program.encode() in obj, h.program
    assert subprocess.run(["true"]).returncode == 0
