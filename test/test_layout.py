"""The test tree as pytest collects it: test folders have no __init__.py (rootdir import mode), so two test
modules of the same file name collide at collection and stop the whole run (a CI run was lost to that)."""

from __future__ import annotations

import collections
from pathlib import Path

TEST_ROOT = Path(__file__).parent


def test_every_test_module_has_a_unique_file_name():
    by_name = collections.defaultdict(list)
    for path in TEST_ROOT.rglob("test_*.py"):
        by_name[path.name].append(str(path.relative_to(TEST_ROOT)))
    clashes = {name: sorted(paths) for name, paths in by_name.items() if len(paths) > 1}
    assert not clashes, f"test modules sharing a file name (rename one): {clashes}"
