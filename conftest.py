"""Top-level conftest: the unlearnbench plugin itself is loaded through its
`pytest11` entry point (pip install -e .), so nothing is needed here beyond
keeping the project's own tests and the suites apart."""
