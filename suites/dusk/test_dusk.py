"""DUSK: selective forgetting under forget/retain overlap (docs/suites/dusk.md).
The plugin makes one test per check in thresholds/dusk.yaml (test_<check>),
plus test_no_regression (active with --baseline)."""

import pytest

pytestmark = pytest.mark.unlearnbench("dusk")
