"""Rewrite tests/golden/traces.json from the current model: ``python -m tests.golden.update``.

Run it only for a deliberate behaviour change, and say in the commit why each changed
trace changed (the script prints which ones did).
"""

from __future__ import annotations

import json

from .cases import HASHES, compute


def main() -> None:
    old = json.loads(HASHES.read_text("utf-8")) if HASHES.exists() else {}
    new = compute()
    for name in sorted(set(old) | set(new)):
        if old.get(name) != new.get(name):
            before = old.get(name, {}) or {}
            after = new.get(name, {}) or {}
            print(f"changed: {name}: segments {before.get('segments')} -> "
                  f"{after.get('segments')}, end {before.get('end_ms')} -> "
                  f"{after.get('end_ms')} ms")
    HASHES.write_text(json.dumps(new, indent=1, sort_keys=True) + "\n", "utf-8")
    print(f"{len(new)} golden traces written to {HASHES}")


if __name__ == "__main__":
    main()
