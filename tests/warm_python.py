"""Python commands of the tests (`python -m pytest ...`, `python -m
unlearnbench.cli ...`, `python -c ...`) run in forked children of one
interpreter that has already imported the heavy third-party libraries.

A cold `python -m pytest suites/dusk ...` spends ~7 s of one core importing
torch, transformers, sentence-transformers, scipy, datasets ... before it
evaluates anything, and ~2 s tearing them down; the end-to-end tests start
dozens of such runs. Here a server process imports them once per test worker, then
forks a child per command: the child is a fresh process (its own pid, memory,
cwd, environment, argv, file descriptors and exit status), whose first import
of those libraries is a dictionary lookup. The code under test is not
imported before the fork (unlearnbench, suites, conftest files), so it starts
as in a cold process and reads the child's environment.

Not for what must see a cold interpreter (which modules a command imports:
tests/unit/test_import_graph.py), nor for reading a command's output while it
runs: its output goes to files, read when it has ended.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import json
import os
import runpy
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import types
from pathlib import Path

# What `pytest suites` imports that takes a noticeable time; unlearnbench's
# own modules are not here (they must import in the child, under its
# environment). Absent optional libraries are skipped.
PRELOAD = ("torch", "transformers", "transformers.models.llama.modeling_llama", "transformers.generation.utils",
           "sentence_transformers", "datasets", "pandas", "pyarrow", "scipy.stats", "sklearn.metrics", "nltk",
           "rouge_score.rouge_scorer", "Levenshtein", "peft", "accelerate", "safetensors.torch", "tokenizers",
           "yaml", "jinja2", "hypothesis", "pytest", "_pytest.pytester")


def _preloaded_plugin_modules() -> list[str]:
    """Preloaded top-level modules of distributions that are pytest plugins
    (anyio comes with transformers, hypothesis is preloaded): pytest marks
    them for assertion rewriting and warns that they were imported before it
    could. Their docstrings get pytest's opt-out marker in the child, which
    silences that warning; a cold run rewrites the asserts of these
    third-party modules, which only changes their assertion messages."""
    from importlib.metadata import entry_points, packages_distributions

    plugin_distributions = {point.dist.name for point in entry_points(group="pytest11") if point.dist}
    return sorted(name for name, distributions in packages_distributions().items()
                  if name in sys.modules and plugin_distributions.intersection(distributions))


def _python_path_entries(env: dict) -> list[str]:
    return [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]


# ---------------------------------------------------------------- server side

def _print_traceback(error: BaseException) -> None:
    """The traceback from the command's own frames on: without this file's
    and runpy's (a cold `python -m` shows two frames of runpy first)."""
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename in (__file__, "<frozen runpy>"):
        tb = tb.tb_next
    sys.excepthook(type(error), error.with_traceback(tb), tb)


def _child(request: dict, control: tuple[int, int], plugin_modules: list[str]) -> None:
    """In the forked child: become the requested `python ...` process; never returns."""
    code = 1
    try:
        os.setpgid(0, 0)  # its own process group: a timeout kills what it started too
        for fd in control:
            os.close(fd)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for fd, path, flags in ((0, request["stdin"], os.O_RDONLY),
                                (1, request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                                (2, request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
            if fd == 2 and path == request["stdout"]:
                os.dup2(1, 2)  # one file, one offset: stderr=STDOUT
                continue
            opened = os.open(path, flags, 0o600)
            os.dup2(opened, fd)
            os.close(opened)
        os.chdir(request["cwd"])
        env = request["env"]
        # sys.path as a cold interpreter with this PYTHONPATH would have it.
        inherited = _python_path_entries(dict(os.environ))
        os.environ.clear()
        os.environ.update(env)
        if env.get("PYTHONUNBUFFERED"):  # read at interpreter start, which this child did not have
            sys.stdout.reconfigure(write_through=True)
            sys.stderr.reconfigure(write_through=True)
        rest = [p for p in sys.path[1:] if p not in inherited]
        for name in plugin_modules:
            sys.modules[name].__doc__ = (sys.modules[name].__doc__ or "") + "\nPYTEST_DONT_REWRITE"
        module, arguments = request["module"], request["arguments"]
        sys.path[:] = [os.getcwd() if module else "", *_python_path_entries(env), *rest]
        try:
            if module:
                sys.argv = [module, *arguments]
                runpy.run_module(module, run_name="__main__", alter_sys=True)
            else:
                sys.argv = ["-c", *arguments[1:]]
                main = types.ModuleType("__main__")
                sys.modules["__main__"] = main
                exec(compile(arguments[0], "<string>", "exec"), main.__dict__)
            code = 0
        except SystemExit as stop:
            if stop.code is None:
                code = 0
            elif isinstance(stop.code, int):
                code = stop.code
            else:
                print(stop.code, file=sys.stderr)
                code = 1
        except KeyboardInterrupt as stop:  # as the interpreter does: the traceback, then death by SIGINT
            _print_traceback(stop)
            sys.stdout.flush()
            sys.stderr.flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        except BaseException as error:  # noqa: BLE001 - as the interpreter does: the traceback, exit 1
            _print_traceback(error)
            code = 1
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def serve() -> None:
    # The control channel leaves fds 0 and 1, which each child points at its own files.
    control_in, control_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - an optional library that is not installed, or does not import here
            pass
    plugin_modules = _preloaded_plugin_modules()
    assert threading.active_count() == 1, "a Python thread would be lost in every forked child"
    gc.collect()
    gc.freeze()  # the children share these pages instead of copying them when the collector walks them
    reader = os.fdopen(control_in, "r")
    writer = os.fdopen(control_out, "w")

    def reply(message: dict) -> None:
        writer.write(json.dumps(message) + "\n")
        writer.flush()

    reply({"ready": True})
    for line in reader:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request, (control_in, control_out), plugin_modules)
        reply({"pid": pid})
        _, status = os.waitpid(pid, 0)
        reply({"returncode": os.waitstatus_to_exitcode(status)})


# ---------------------------------------------------------------- client side

class WarmProcess:
    """A command running in a child of the warm interpreter, like a
    `subprocess.Popen` whose output goes to files: `pid`, `send_signal`,
    `kill`, `wait`, `communicate`. The warm interpreter runs one at a time."""

    def __init__(self, python: "WarmPython", arguments: list[str], pid: int, folder: tempfile.TemporaryDirectory,
                 files: dict[str, str]) -> None:
        self.args = [sys.executable, *arguments]
        self.pid, self.returncode = pid, None
        self._python, self._folder, self._files = python, folder, files

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        """SIGKILL to the child's process group (what it started dies too),
        and reaped: the warm interpreter is free for the next command."""
        if self.returncode is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.wait()

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self._python._receive(timeout, self.args)["returncode"]
            self._python._lock.release()
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """(stdout, stderr) once it has ended; on a timeout it keeps running, as with Popen."""
        self.wait(timeout)
        out = tuple(Path(self._files[name]).read_text(errors="replace") for name in ("stdout", "stderr"))
        self._folder.cleanup()
        return out


class WarmPython:
    """One server per test worker, started on first use. `run` is
    `subprocess.run([sys.executable, *arguments], capture_output=True,
    text=True, ...)` and `start` is `subprocess.Popen(...)` for `-m module
    ...` and `-c code ...` commands."""

    def __init__(self) -> None:
        self._server: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._received = b""

    def _receive(self, timeout: float | None, command: list[str]) -> dict:
        """The server's next message; subprocess.TimeoutExpired if none comes in `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        fd = self._server.stdout.fileno()
        while b"\n" not in self._received:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([fd], [], [], left)[0]:
                raise subprocess.TimeoutExpired(command, timeout)
            chunk = os.read(fd, 4096)
            if not chunk:
                raise RuntimeError("the warm interpreter ended")
            self._received += chunk
        line, self._received = self._received.split(b"\n", 1)
        return json.loads(line)

    def start(self, arguments: list[str], *, cwd: str | os.PathLike | None = None, env: dict | None = None,
              input: str | None = None, merge_stderr: bool = False) -> WarmProcess:
        """The command started in a forked child; `merge_stderr` sends its
        stderr to its stdout (Popen's stderr=STDOUT)."""
        if arguments[0] == "-m":
            module, rest = arguments[1], list(arguments[2:])
        elif arguments[0] == "-c":
            module, rest = "", list(arguments[1:])
        else:
            raise ValueError(f"a warm run takes -m module or -c code, not {arguments[0]!r}")
        self._lock.acquire()
        try:
            if self._server is None or self._server.poll() is not None:
                self._server = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE,
                                                stdout=subprocess.PIPE, start_new_session=True)
                self._received = b""
                assert self._receive(None, [__file__]) == {"ready": True}
            folder = tempfile.TemporaryDirectory(prefix="warm-python-")
            files = {name: str(Path(folder.name) / name) for name in ("stdin", "stdout", "stderr")}
            if merge_stderr:
                files["stderr"] = files["stdout"]
            Path(files["stdin"]).write_text(input or "")
            request = {"module": module, "arguments": [str(a) for a in rest], "cwd": str(cwd or os.getcwd()),
                       "env": dict(os.environ if env is None else env), **files}
            self._server.stdin.write((json.dumps(request) + "\n").encode())
            self._server.stdin.flush()
            pid = self._receive(None, arguments)["pid"]
        except BaseException:
            self._lock.release()
            raise
        return WarmProcess(self, list(arguments), pid, folder, files)

    def run(self, arguments: list[str], *, cwd: str | os.PathLike | None = None, env: dict | None = None,
            timeout: float | None = None, input: str | None = None) -> subprocess.CompletedProcess:
        process = self.start(arguments, cwd=cwd, env=env, input=input)
        try:
            stdout, stderr = process.communicate(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
            raise subprocess.TimeoutExpired(process.args, timeout, stdout, stderr) from None
        return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)

    def runpytest(self, pytester, *args, timeout: float | None = None):
        """`pytester.runpytest_subprocess(*args)`: the same arguments (a
        numbered --basetemp under the pytester's folder, its plugins as -p),
        working directory and PYTHONPATH (the folder first), and result."""
        import pytest
        from _pytest.pathlib import make_numbered_dir

        basetemp = make_numbered_dir(root=pytester.path, prefix="runpytest-", mode=0o700)
        arguments = [f"--basetemp={basetemp}", *map(os.fspath, args)]
        for plugin in pytester.plugins:
            arguments = ["-p", plugin, *arguments]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH", "")]))
        start = time.perf_counter()
        done = self.run(["-m", "pytest", *arguments], cwd=os.getcwd(), env=env, timeout=timeout)
        return pytest.RunResult(done.returncode, done.stdout.splitlines(), done.stderr.splitlines(),
                                time.perf_counter() - start)

    def close(self) -> None:
        if self._server is not None and self._server.poll() is None:
            self._server.stdin.close()
            self._server.wait(timeout=30)


class WarmPytester:
    """A pytester whose `runpytest_subprocess` runs pytest in a child of the
    warm interpreter; everything else is the pytester's own."""

    def __init__(self, pytester, python: WarmPython) -> None:
        self._pytester = pytester
        self._python = python

    def __getattr__(self, name: str):
        return getattr(self._pytester, name)

    def runpytest_subprocess(self, *args, timeout: float | None = None):
        return self._python.runpytest(self._pytester, *args, timeout=timeout)


if __name__ == "__main__":
    serve()
