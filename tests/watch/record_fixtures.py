"""Record the raw-event fixtures of tests/watch (root, Linux with BTF).

    sudo python -m tests.watch.record_fixtures

Runs realnet/watch/demo.py in each variant under watch and writes every raw record
(realnet.watch.raw fixture format) to tests/watch/fixtures/NAME.jsonl. The unit tests
decode these without root; re-record them when the BPF record layout changes.
"""

import sys
from pathlib import Path

from realnet.watch import raw
from realnet.watch.loader import Config
from realnet.watch.session import run

HERE = Path(__file__).resolve().parent
VARIANTS = {
    "wwr": ["--rounds", "5"],
    "wwr_v6": ["--rounds", "3", "--v6"],
    "nodelay": ["--rounds", "5", "--nodelay"],
    "quickack": ["--rounds", "5", "--quickack"],
    "cork": ["--rounds", "2", "--cork"],
    "more": ["--rounds", "2", "--more"],
}


def main() -> int:
    for name, args in VARIANTS.items():
        r = run(Config(), [sys.executable, "-m", "realnet.watch.demo", "--quiet", *args],
                keep_records=True)
        if r.returncode != 0 or r.counters.get("lost"):
            print(f"{name}: exit {r.returncode}, counters {r.counters}", file=sys.stderr)
            return 1
        out = HERE / "fixtures" / f"{name}.jsonl"
        with out.open("w", encoding="utf-8") as f:
            n = raw.write_fixture(f, r.host, r.records)
        print(f"{name}: {n} records, {len(r.stalls)} stalls -> {out.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
