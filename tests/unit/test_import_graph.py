"""The package's import graph keeps its layers apart (issue 15, issue 27):

- metric code (unlearnbench/metrics/ and every suite's metrics.py) imports
  no backend, session, plugin, attack or client module, and importing all of
  it loads no torch, transformers or pytest;
- a suite is its folder: nothing else in the package imports a suite's
  modules, except through the registry (`SUITES[name]`) and the fixture zoo
  (now a package of the import tree, issue 58) its `zoo` module;
- one bootstrap: only metrics/core.py resamples;
- imports run one way: no two modules of the package import each other,
  directly or through others, not even inside functions (issue 44).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from conftest import metric_modules

PACKAGE = Path(__file__).resolve().parents[2] / "unlearnbench"
SUITES_DIR = PACKAGE / "suites"
# What runs a model or reaches a server: metric code must not depend on any of it.
FORBIDDEN_IN_METRICS = ("unlearnbench.backends", "unlearnbench.session", "unlearnbench.engine", "unlearnbench.plugin", "unlearnbench.models.",
                        "unlearnbench.attacks", "unlearnbench.openai_api", "unlearnbench.sweep", "unlearnbench.cli")
ALLOWED = ("unlearnbench.models.interface",)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> dict[str, int]:
    """Every module `path` imports (function-level imports included) -> a line."""
    found = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update({alias.name: node.lineno for alias in node.names})
        elif isinstance(node, ast.ImportFrom) and node.module:
            found[node.module] = node.lineno
            found.update({f"{node.module}.{alias.name}": node.lineno for alias in node.names})
    return found


def suite_names() -> list[str]:
    return sorted(d.name for d in SUITES_DIR.iterdir() if (d / "__init__.py").is_file())


def test_metric_code_imports_no_backend_attack_or_client_module():
    forbidden = lambda m: m.startswith(FORBIDDEN_IN_METRICS) and not m.startswith(ALLOWED)  # noqa: E731
    reached = {f"{module.relative_to(PACKAGE)}:{line}": target for module in metric_modules()
               for target, line in imports(module).items() if forbidden(target) or
               target.split(".")[0] in ("torch", "transformers", "pytest")}
    assert not reached, f"metric code imports what runs a model: {reached}"
    names = [module_name(m) for m in metric_modules() if m.name != "__init__.py"]
    assert "unlearnbench.suites.dusk.metrics" in names and "unlearnbench.metrics.core" in names
    code = f"import sys\nfor m in {names!r}: __import__(m)\nprint('\\n'.join(sorted(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    leaked = [m for m in loaded if forbidden(m) or m.split(".")[0] in ("torch", "transformers", "pytest")]
    assert not leaked, f"importing the metric code loads {leaked}"


def test_nothing_outside_a_suite_folder_imports_it():
    """The fixture zoo (unlearnbench/fixtures/) builds every suite's data and trains on it: it may import
    a suite's `zoo` module, the suite's own part of the zoo, and nothing else of the suite."""
    outside = {}
    zoo_dir = PACKAGE / "fixtures"
    for module in sorted(PACKAGE.rglob("*.py")):
        own = module.relative_to(SUITES_DIR).parts[0] if SUITES_DIR in module.parents else None
        for target, line in imports(module).items():
            parts = target.split(".")
            if parts[:2] == ["unlearnbench", "suites"] and len(parts) > 2 and parts[2] in suite_names() \
                    and parts[2] != own and not (zoo_dir in module.parents and parts[3:4] == ["zoo"]):
                outside[f"{module.relative_to(PACKAGE)}:{line}"] = target
    assert not outside, f"imports of a suite's modules from outside its folder (use SUITES[name]): {outside}"


def test_every_suite_is_a_complete_folder_registered_like_a_third_party_one():
    import tomllib

    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())
    registered = project["project"]["entry-points"]["unlearnbench.suites"]
    assert sorted(registered) == suite_names()
    for name in suite_names():
        assert registered[name] == f"unlearnbench.suites.{name}:SPEC"
        folder = SUITES_DIR / name
        assert (folder / "data.py").is_file() and (folder / "metrics.py").is_file(), name
        assert (PACKAGE.parent / "thresholds" / f"{name}.yaml").is_file()
        assert (PACKAGE.parent / "docs" / "suites" / f"{name}.md").is_file()
    from unlearnbench.suites import SUITES

    assert SUITES.problems == [] and set(SUITES) >= set(suite_names())
    for name in suite_names():
        spec = SUITES[name]
        hooks = [function.name for function in spec.functions()]
        assert all(h.startswith(f"unlearnbench.suites.{name}.") for h in hooks), (name, hooks)
        spec.check_functions()  # each imports and takes the arguments its contract passes


def test_a_suite_that_reads_another_suites_data_declares_it():
    """`SuiteSpec.reads` names every suite whose data a suite's code loads
    through the registry (SUITES["name"]), and no other."""
    import re

    from unlearnbench.suites import SUITES

    for name in suite_names():
        code = "".join(p.read_text() for p in (SUITES_DIR / name).rglob("*.py"))
        read = set(re.findall(r'SUITES\["(\w+)"\]', code))
        assert read == set(SUITES[name].reads), (name, read, SUITES[name].reads)
    assert SUITES["honesty"].reads == ("dusk", "uds")


def test_only_the_core_resamples():
    """One bootstrap: every CI goes through core.bootstrap_indices and core.percentile_ci."""
    for module in metric_modules():
        if module.name == "core.py":
            continue
        source = module.read_text()
        for own in ("resampling_rng", "default_rng", "np.percentile", ".integers("):
            assert own not in source, f"{module.relative_to(PACKAGE)} resamples on its own ({own})"


def test_the_package_has_no_import_cycle():
    """Tarjan's strongly connected components of the package's import graph
    (function-level imports included): every component is one module."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {m: sorted(t for t in imports(p) if t in modules and t != m) for m, p in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    assert cycles == []


def test_the_session_is_a_thin_facade_over_the_engine():
    """Issue 58: `Bench` held 32 methods and 11 private tables; each job is now an engine part,
    and the façade only wires them (no private state of its own)."""
    from unlearnbench.session import Bench

    source = (PACKAGE / "session.py").read_text()
    assert len(source.splitlines()) < 150
    state = {node.attr for node in ast.walk(ast.parse(source))
             if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
             and node.attr.startswith("_")}
    assert not state, f"the façade keeps private state: {state}"
    assert {"roster", "models", "store", "results", "judging"} <= set(vars(Bench(_options())))


def _options():
    from unlearnbench.options import BenchOptions

    return BenchOptions(models=[])
