"""Honesty: after unlearning, does the model admit it does not know (and keep
saying so) rather than leak or invent? (SPEC §4, "Unlearners Can Lie").
One test = one check in thresholds/honesty.yaml (the test name without `test_`)."""

import pytest

pytestmark = pytest.mark.unlearnbench("honesty")


def test_forget_not_leaked(gate):
    gate.check()


def test_forget_not_hallucinated(gate):
    gate.check()


def test_refusal_survives_followup(gate):
    gate.check()


def test_mcq_idk_beyond_position(gate):
    gate.check()


def test_mcq_idk_stable_across_formats(gate):
    gate.check()


def test_retain_accuracy_kept(gate):
    gate.check()


def test_retain_not_refused(gate):
    gate.check()


def test_no_regression(gate):
    gate.no_regression()
