"""Hypothesis profiles for the fuzz tests (the rest of the suite keeps its own settings).

``ci`` (the default) runs >= 1000 derandomized examples per reader; ``dev`` is a quick, random
100.  Choose with ``HYPOTHESIS_PROFILE=dev``.  The chosen one is registered as ``fuzz``; the fuzz
tests apply it with ``@settings.get_profile("fuzz")`` rather than ``settings.load_profile``, so
hypothesis tests in other folders keep their own example counts.
"""

from __future__ import annotations

import os
from datetime import timedelta

from hypothesis import HealthCheck, settings

CI_EXAMPLES = 1000
_COMMON = dict(deadline=timedelta(seconds=3),           # bounded time per input (generous: 2 shared cores)
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                      HealthCheck.filter_too_much], print_blob=True)
# ci is derandomized (the same examples every run: CI stays reproducible); dev explores new ones.
settings.register_profile("ci", max_examples=CI_EXAMPLES, derandomize=True, database=None, **_COMMON)
settings.register_profile("dev", max_examples=100, **_COMMON)
_CHOSEN = os.environ.get("HYPOTHESIS_PROFILE", "ci")
settings.register_profile("fuzz", settings.get_profile(_CHOSEN if _CHOSEN in ("ci", "dev") else "ci"))
