"""Robustness: does the forgetting survive 4-bit and 8-bit quantization and a
LoRA relearning attack (docs/suites/robustness.md)? The plugin makes one test per check in
thresholds/robustness.yaml (test_<check>), plus test_no_regression."""

import pytest

pytestmark = pytest.mark.unlearnbench("robustness")
