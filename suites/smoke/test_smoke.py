"""Smoke suite: the plugin's worked example. One test = one check in
thresholds/smoke.yaml (the test name without `test_`)."""

import pytest

pytestmark = pytest.mark.unlearnbench("smoke")


def test_fluent_on_reference_texts(gate):
    gate.check()


def test_answers_reference_questions(gate):
    gate.check()


def test_no_less_fluent_than_full(gate):
    gate.check()


def test_no_regression(gate):
    gate.no_regression()
