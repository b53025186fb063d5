"""ConceptGuard: is harmful use of a dual-use concept removed while its benign
use is kept? (docs/suites/conceptguard.md, contextual separation). The plugin makes one test per
check in thresholds/conceptguard.yaml (test_<check>), plus test_no_regression
(active with --baseline)."""

import pytest

pytestmark = pytest.mark.unlearnbench("conceptguard")
