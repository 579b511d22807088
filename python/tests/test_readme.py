"""The README's Python examples run and print what the README shows after them.

Each ```` ```python ```` block of ``README.md`` and ``python/README.md`` runs in a fresh
interpreter in the repository root; the ```` ```text ```` block right after it is its expected
output, compared exactly.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"```python\n(.*?)```\n\n```text\n(.*?)```", re.S)


def _examples():
    out = []
    for readme in (ROOT / "README.md", ROOT / "python" / "README.md"):
        text = readme.read_text(encoding="utf-8")
        for m in BLOCK.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            out.append(pytest.param(m.group(1), m.group(2), id=f"{readme.parent.name}:{line}"))
    return out


EXAMPLES = _examples()


def test_both_readmes_have_python_examples():
    # One in the repository's README, the rest in python/README.md: a lost block fails here.
    assert len(EXAMPLES) >= 3, [p.id for p in EXAMPLES]


@pytest.mark.parametrize("script,expect", EXAMPLES)
def test_a_readme_example_prints_what_the_readme_shows(script, expect):
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == expect
