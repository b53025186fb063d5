"""The warm interpreter (tests/warm_python.py) runs a command as a cold
`python` process would: the same output, exit status, argv, sys.path, working
directory and environment; timeouts and signals as with subprocess."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

PROBE = """
import json, os, sys
print(json.dumps({"argv": sys.argv, "path0": sys.path[0], "cwd": os.getcwd(), "name": __name__,
                  "probe_var": os.environ.get("PROBE_VAR"), "extra_on_path": os.environ["EXTRA"] in sys.path,
                  "stdin": sys.stdin.read()}))
print("to stderr", file=sys.stderr)
sys.exit(int(os.environ.get("PROBE_EXIT", "0")))
"""


def both(warm_python, arguments, **kwargs):
    cold = subprocess.run([sys.executable, *arguments], capture_output=True, text=True, **kwargs)
    warm = warm_python.run(arguments, **kwargs)
    return cold, warm


@pytest.mark.parametrize("exit_code", [0, 3])
def test_a_c_command_sees_what_a_cold_interpreter_sees(warm_python, tmp_path, exit_code):
    env = {**os.environ, "PROBE_VAR": "x", "PROBE_EXIT": str(exit_code), "EXTRA": str(tmp_path / "extra"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path / "extra"), os.environ.get("PYTHONPATH")]))}
    cold, warm = both(warm_python, ["-c", PROBE, "a", "b c"], cwd=tmp_path, env=env, input="typed")
    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr)
    assert cold.returncode == exit_code and '"probe_var": "x"' in cold.stdout


def test_a_module_command_sees_what_a_cold_interpreter_sees(warm_python, tmp_path):
    (tmp_path / "probe.py").write_text(PROBE)
    env = {**os.environ, "EXTRA": str(tmp_path)}
    cold, warm = both(warm_python, ["-m", "probe", "--flag"], cwd=tmp_path, env=env)
    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr)
    assert '"name": "__main__"' in cold.stdout and str(tmp_path / "probe.py") in cold.stdout


def test_exceptions_and_exit_messages_end_as_in_a_cold_interpreter(warm_python, tmp_path):
    for code in ("raise ValueError('boom')", "import sys; sys.exit('a message')"):
        cold, warm = both(warm_python, ["-c", code], cwd=tmp_path)
        assert (warm.returncode, warm.stderr) == (cold.returncode, cold.stderr) and cold.returncode == 1


def test_sigint_and_timeouts_as_with_subprocess(warm_python, tmp_path):
    started = warm_python.start(["-c", "import time; print('up', flush=True); time.sleep(60)"], cwd=tmp_path,
                                merge_stderr=True)
    time.sleep(1)
    started.send_signal(signal.SIGINT)
    output, _ = started.communicate(timeout=30)
    assert started.returncode == -signal.SIGINT  # KeyboardInterrupt uncaught: the interpreter dies by SIGINT
    assert output.startswith("up\n") and "KeyboardInterrupt" in output
    with pytest.raises(subprocess.TimeoutExpired):
        warm_python.run(["-c", "import time; time.sleep(60)"], timeout=1)
    assert warm_python.run(["-c", "print('still serving')"]).stdout == "still serving\n"
