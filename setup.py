"""The package list, found rather than written: every package under
unlearnbench/, plus the checkout folders pyproject.toml's package-dir maps
into it (fixtures/, and thresholds/ and suites/ as unlearnbench.defaults).
Everything else is in pyproject.toml."""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["unlearnbench", "unlearnbench.*"]), "unlearnbench.fixtures",
                "unlearnbench.defaults.thresholds", "unlearnbench.defaults.suites"])
