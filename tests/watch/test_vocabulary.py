"""watch speaks the model's Reason vocabulary and explain's cause words (one vocabulary)."""

import re
from pathlib import Path

from nagle_sim.explain.causes import CAUSES
from nagle_sim.model.events import Reason
from realnet.watch import decide


def test_cause_words_are_explains():
    assert set(decide.CAUSE_OF.values()) <= set(CAUSES)
    assert set(decide._FIX) <= set(CAUSES)


def test_every_reason_the_engine_names_exists():
    src = Path(decide.__file__).read_text()
    for name in re.findall(r"Reason\.([A-Z][A-Z0-9_]+)", src):
        assert name in Reason.__members__, name
