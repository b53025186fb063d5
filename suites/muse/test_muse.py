"""MUSE as OpenUnlearning computes it (docs/suites/muse.md). The plugin makes one test
per check in thresholds/muse.yaml (test_<check>), plus test_no_regression."""

import pytest

pytestmark = pytest.mark.unlearnbench("muse")
