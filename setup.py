"""The package list, found rather than written: every package under
unlearnbench/ (the fixture zoo included), plus the checkout folders
pyproject.toml's package-dir maps into it (thresholds/ and suites/ as
unlearnbench.defaults: each suite's folder a package, so `pytest --pyargs
unlearnbench.defaults.suites.<name>` runs it from an installed wheel), which
pyproject's own `packages.find` cannot find. Everything else is in
pyproject.toml."""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["unlearnbench", "unlearnbench.*"]), "unlearnbench.defaults.thresholds",
                *(f"unlearnbench.defaults.{name}" for name in find_packages(include=["suites", "suites.*"]))])
