"""TOFU as OpenUnlearning computes it (docs/suites/tofu.md). The plugin makes one test
per check in thresholds/tofu.yaml (test_<check>), plus test_no_regression."""

import pytest

pytestmark = pytest.mark.unlearnbench("tofu")
