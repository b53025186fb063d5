"""MUSE as OpenUnlearning computes it (SPEC §10). The plugin makes one test
per check in thresholds/muse.yaml (test_<check>), plus test_no_regression."""

import pytest

pytestmark = pytest.mark.unlearnbench("muse")
