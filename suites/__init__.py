"""The suites' thin test modules, one folder per suite. Packages, so that an
installed wheel runs them from any folder: `pytest --pyargs
unlearnbench.defaults.suites.<name>` (docs/your-repository.md)."""
