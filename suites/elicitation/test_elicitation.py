"""Elicitation: a forgotten fact stays gone however it is asked (other
wordings, blanks, multiple choice, true or false, the reverse relation, one
hop, a few shots, a reminder, a role), and the neighbours' facts are kept
(docs/suites/elicitation.md). The plugin makes one test per check in
thresholds/elicitation.yaml (test_<check>), plus test_no_regression (active
with --baseline)."""

import pytest

pytestmark = pytest.mark.unlearnbench("elicitation")
