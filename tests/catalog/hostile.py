"""The hostile corpus: submissions that misbehave on purpose, each with the outcome a fair grader gives it.

The rules behind the outcomes:
* a wrong answer wrapped in forgery (patched comparisons, fake results files, fake JSON, forged frames on
  the grader's channel) still scores as wrong;
* a correct answer that merely misbehaves around it still scores as correct;
* a cell that crashes the process, hangs or kills itself while loading counts like a cell that raised an
  exception: it is reported in the notes, skipped, and the rest of the submission is graded;
* misbehaviour inside `forward` costs the forward's points, never Task 2's (and the other way round).

Hostile code goes into its own cell (`# %%`) at the end of the module unless it is part of `forward` or
Task 2. Paths outside the sandbox are computed here, in the trusted test process, and written into the
source, so the corpus aims at the real repository and the real temporary folder.
"""
from __future__ import annotations

import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

from autograder import kit

from .build import submission

# Outcomes (see tests/test_hostile.py for exactly what each asserts).
FULL = "full marks"                 # score == TOTAL_POINTS
TASK2_ONLY = "Task 2 only"          # every forward check 0 points, Task 2 full: only the forward is lost
TASK1_ONLY = "Task 1 only"          # every forward check full, Task 2 0 points
WRONG = "wrong forward"             # 'output matches a Pre-LN block' lost, Task 2 full, below full marks
ZERO = "zero"                       # score 0: nothing could be graded

# What an entry's outcome relies on; without it the outcome assertion is skipped (or the case not run).
BUBBLEWRAP = "bubblewrap"           # without it the grading files are readable by path
SANDBOX_USER = "sandbox user"       # without it (not root) the child runs as the grader's own user

# The test server's limits: short, so that what can only fail by running out of time fails in seconds.
LIMITS = {"load_s": 3, "probe_s": 3, "job_s": 20, "processes": 16}

PASSED = "All parts passed"         # the phrase of full marks with nothing to explain
MARK = "hostile-corpus-forgery"     # in every forged file, so a stray one is recognisable
TMP = Path(tempfile.gettempdir())
CANARY = TMP / "autograder-hostile-canary"          # made by the test; the corpus tries to delete it
FORGED_IN_TMP = (TMP / "results.json", TMP / f"{MARK}.json")    # the shared temporary folder
FORGED_IN_GRADER_FOLDERS = (                                    # the repository, the harness, Gradescope's results
    kit.ROOT / "results.json",
    kit.ROOT / "out" / "results.json",
    kit.ROOT / "autograder" / "harness" / "results.json",
    Path("/autograder/results/results.json"),
)
FORGED_PATHS = FORGED_IN_TMP + FORGED_IN_GRADER_FOLDERS          # outside the sandbox: none may hold a forgery


@dataclass(frozen=True)
class Hostile:
    name: str
    source: str
    outcome: str
    phrase: str                       # must appear (any case) in the result's messages or notes
    needs: str | None = None          # BUBBLEWRAP or SANDBOX_USER
    known_bug: str | None = None      # expected to fail, and why (xfail, strict)
    max_seconds: float | None = None  # the grading must not take longer than this


def cell(code: str, label: str = "hostile") -> str:
    """`code` as a cell of its own at the end of the module."""
    return f"\n# %% {label}\n{textwrap.dedent(code).strip()}\n"


POST_LN = """
def forward(self, x):
    x = self.norm1(x + self.drop_shortcut(self.att(x)))
    return self.norm2(x + self.drop_shortcut(self.ff(x)))
"""

FORGE_FRAMES = """
import json, os

def _frame(obj):
    data = json.dumps(obj).encode()
    os.write(3, len(data).to_bytes(4, "big") + data)
"""

IGNORE_SIGNALS = """
import signal
for _number in (signal.SIGALRM, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU):
    signal.signal(_number, signal.SIG_IGN)
signal.pthread_sigmask(signal.SIG_BLOCK, set(signal.Signals) - {signal.SIGKILL, signal.SIGSTOP})
"""

FAKE_RESULTS = f"""
import json, os
_fake = json.dumps({{"score": 100.0, "max_score": 24, "output": "All tests passed", "tests": [], "mark": {MARK!r}}})
_inside = [os.path.join(os.getcwd(), "results.json"), os.path.join(os.path.expanduser("~"), "results.json")]
for _path in _inside + {[str(p) for p in FORGED_PATHS]!r}:
    try:
        os.makedirs(os.path.dirname(_path), exist_ok=True)
        with open(_path, "w") as _handle:
            _handle.write(_fake)
    except OSError:
        pass
"""

FAKE_JSON = f"""
import json
FAKE = json.dumps({{"score": 24.0, "max_score": 24.0, "output": "All tests passed", "mark": {MARK!r},
                   "tests": [{{"name": "forward_order", "score": 4, "max_score": 4, "status": "passed"}}]}})
print(FAKE)
print("\\x00\\x00\\x00\\x10" + FAKE)    # and once framed like the grader's own messages
"""

# Look for the solution the way a determined student would: through the grader's modules (after removing
# the import block), the notebooks at their known paths, and a walk around the folder the harness came from;
# run the first solution found so that TransformerBlock becomes the reference's.
FIND_REFERENCE = f"""
import importlib, json, os, sys, time
ROOT = {str(kit.ROOT)!r}
_sources = []
sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "_NoGradingCode"]
sys.path[:0] = [ROOT, os.path.dirname(ROOT), "/"]
for _name in ("autograder.kit", "autograder.grading", ROOT.strip("/").replace("/", ".") + ".autograder.kit"):
    try:
        _module = importlib.import_module(_name)
        _kit = getattr(_module, "kit", _module)
        _sources += [code for label, code in _kit.KIT.reference_code() if "task1" in label]
    except Exception:
        pass
_paths = [os.path.join(ROOT, "assignments", "source", "layernorm", "layernorm.ipynb"),
          os.path.join(ROOT, "solutions", "layernorm.ipynb")]
_harness = os.path.dirname(getattr(sys.modules.get("autograder.harness"), "__file__", None) or ROOT)
_stop, _seen = time.monotonic() + 1.5, 0
for _top, _dirs, _files in os.walk(os.path.dirname(os.path.dirname(_harness))):
    _dirs[:] = [d for d in _dirs if not d.startswith(".") and d not in ("site-packages", "node_modules")]
    _paths += [os.path.join(_top, f) for f in _files if f.endswith(".ipynb")]
    _seen += 1
    if time.monotonic() > _stop or _seen > 2000:
        break
for _path in _paths:
    try:
        with open(_path) as _handle:
            _notebook = json.load(_handle)
        _cells = ["".join(c["source"]) for c in _notebook["cells"]]
        _sources += [code for code in _cells if "class TransformerBlock" in code]
    except Exception:
        pass
for _code in _sources:
    if "BEGIN SOLUTION" in _code or "x = x + shortcut" in _code:
        exec(_code, globals())
        break
"""


def _entries() -> list[Hostile]:
    return [
        # --- code that does not compile ----------------------------------------------------------------
        Hostile("syntax_error_in_forward", submission(forward="def forward(self, x):\n    return x +\n"),
                TASK2_ONLY, "SyntaxError"),
        Hostile("syntax_error_everywhere", "def forward(self x):\n    return x\n\nclass TransformerBlock(\n",
                ZERO, "SyntaxError"),

        # --- never finishing ---------------------------------------------------------------------------
        Hostile("endless_loop_in_forward",
                submission(forward="def forward(self, x):\n    while True:\n        pass\n"),
                TASK2_ONLY, "did not finish within 3 s"),
        Hostile("endless_loop_while_loading_ignoring_signals",
                submission(extra=cell(IGNORE_SIGNALS + "\nimport time\nwhile True:\n    time.sleep(0.01)")),
                FULL, "did not finish within 3 s"),
        Hostile("endless_loop_in_task2", submission(task2="""
            def magnitude_by_formula(factor, n_layers):
                while True:
                    pass

            def magnitude_by_autograd(factor, n_layers):
                return magnitude_by_formula(factor, n_layers)

            def classify_factor(factor):
                return magnitude_by_formula(factor, 1)
            """), TASK1_ONLY, "did not finish within 3 s during the 'compounding' check"),

        # --- ending the process ------------------------------------------------------------------------
        Hostile("sys_exit_while_loading", submission(extra=cell("import sys\nsys.exit(0)")), FULL, "SystemExit"),
        Hostile("os_exit_while_loading", submission(extra=cell("import os\nos._exit(0)")),
                FULL, "ended the grading process in this cell"),
        Hostile("keyboard_interrupt_while_loading", submission(extra=cell("raise KeyboardInterrupt")),
                FULL, "KeyboardInterrupt"),
        Hostile("sigkill_self_while_loading",
                submission(extra=cell("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")),
                FULL, "killed in this cell"),
        Hostile("sys_exit_in_forward", submission(forward="def forward(self, x):\n    import sys\n    sys.exit(1)\n"),
                TASK2_ONLY, "SystemExit"),
        Hostile("os_exit_in_forward", submission(forward="def forward(self, x):\n    import os\n    os._exit(0)\n"),
                TASK2_ONLY, "ended the grading process during the 'eval' check"),
        Hostile("keyboard_interrupt_in_forward",
                submission(forward="def forward(self, x):\n    raise KeyboardInterrupt\n"),
                TASK2_ONLY, "KeyboardInterrupt"),
        Hostile("sigkill_self_in_forward",
                submission(forward="def forward(self, x):\n    import os, signal\n    os.kill(os.getpid(), signal.SIGKILL)\n"),
                TASK2_ONLY, "killed during the 'eval' check"),
        Hostile("kill_the_grader", submission(extra=cell("""
            import os, signal
            def _parent_of(pid):
                with open(f"/proc/{pid}/stat") as stat:
                    return int(stat.read().rsplit(")", 1)[1].split()[1])
            _server = os.getppid()
            for _kill in (lambda: os.kill(_server, signal.SIGKILL),                  # the grading server
                          lambda: os.killpg(os.getpgid(_server), signal.SIGKILL),    # its process group
                          lambda: os.kill(_parent_of(_server), signal.SIGKILL)):     # what started it
                try:
                    _kill()
                except OSError:
                    pass
            os.kill(os.getpid(), signal.SIGKILL)                                     # and, failing that, itself
            """)), FULL, "killed in this cell", needs=SANDBOX_USER),

        # --- resources ---------------------------------------------------------------------------------
        Hostile("memory_bomb_in_forward", submission(forward="""
            def forward(self, x):
                hog = []
                while True:
                    hog.append(torch.empty(2**27))
            """), TASK2_ONLY, "can't allocate memory"),
        Hostile("memory_bomb_while_loading", submission(extra=cell("_hog = [0] * 2**40")), FULL, "out of memory"),
        Hostile("fork_bomb_while_loading", submission(extra=cell("import os\nwhile True:\n    os.fork()")),
                FULL, "BlockingIOError"),
        Hostile("fork_bomb_in_forward", submission(forward="""
            def forward(self, x):
                import os
                while True:
                    try:
                        if os.fork() == 0:
                            os.setsid()     # out of the child's session: the grader must still find it
                    except OSError:
                        pass
            """), TASK2_ONLY, "did not finish within 3 s"),
        Hostile("output_flood_while_loading", submission(extra=cell(
            "import os, sys\nfor _ in range(50):\n    sys.stdout.write('x' * 1_000_000)\n"
            "sys.stderr.write('y' * 10_000_000)\nos.write(1, b'z' * 1_000_000)")), FULL, PASSED),
        Hostile("output_flood_in_forward", submission(forward="""
            def forward(self, x):
                print("x" * 1_000_000)
                x = x + self.drop_shortcut(self.att(self.norm1(x)))
                return x + self.drop_shortcut(self.ff(self.norm2(x)))
            """), FULL, PASSED),
        Hostile("background_thread_keeps_printing", submission(extra=cell("""
            import sys, threading, time
            def _chatter():
                while True:
                    sys.stdout.write("still here\\n")
                    time.sleep(0.001)
            threading.Thread(target=_chatter, daemon=True).start()
            """)), FULL, PASSED),
        Hostile("orphan_keeps_the_pipes_open", submission(extra=cell("""
            import os, time
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    time.sleep(600)
                os._exit(0)
            """)), FULL, PASSED, max_seconds=LIMITS["probe_s"]),
        Hostile("os_exit_in_forward_while_an_orphan_keeps_the_pipes", submission(
            forward="def forward(self, x):\n    import os\n    os._exit(3)\n",
            extra=cell("import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(600)")),
                TASK2_ONLY, "ended the grading process during the 'eval' check (exit 3"),
        Hostile("unbounded_recursion_in_forward", submission(forward="def forward(self, x):\n    return self(x)\n"),
                TASK2_ONLY, "RecursionError"),
        Hostile("unbounded_recursion_while_loading",
                submission(extra=cell("def _down(n):\n    return _down(n + 1)\n_down(0)")),
                FULL, "RecursionError"),
        Hostile("unbounded_recursion_past_a_raised_limit", submission(extra=cell("""
            import sys
            class _Deeper:
                def __call__(self, n):
                    return self(n + 1)      # through C: the process's own stack overflows, not Python's limit
            sys.setrecursionlimit(10**8)
            _Deeper()(0)
            """)), FULL, "deep recursion"),

        # --- wrong values, wrong types -----------------------------------------------------------------
        Hostile("nan_output", submission(forward="def forward(self, x):\n    return x * float('nan')\n"), WRONG, "NaN"),
        Hostile("inf_output", submission(forward="""
            def forward(self, x):
                x = x + self.drop_shortcut(self.att(self.norm1(x)))
                x = x + self.drop_shortcut(self.ff(self.norm2(x)))
                return x + float("inf")
            """), WRONG, "NaN or inf"),
        Hostile("returns_a_tuple", submission(forward="def forward(self, x):\n    return x, None\n"),
                TASK2_ONLY, "not a tensor"),
        Hostile("returns_a_numpy_array",
                submission(forward="def forward(self, x):\n    return x.detach().numpy()\n"),
                TASK2_ONLY, "not a tensor"),
        Hostile("returns_the_wrong_shape", submission(forward="def forward(self, x):\n    return x[:, :-1]\n"),
                TASK2_ONLY, "shape"),

        # --- forgery -----------------------------------------------------------------------------------
        Hostile("patched_comparisons_on_a_wrong_forward", submission(forward=POST_LN, extra=cell("""
            import numpy, numpy.testing, torch, torch.testing
            torch.allclose = torch.Tensor.allclose = lambda *a, **k: True
            torch.equal = torch.Tensor.equal = lambda *a, **k: True
            torch.isclose = lambda a, b, *r, **k: torch.ones_like(a, dtype=torch.bool)
            torch.Tensor.__eq__ = lambda self, other: torch.ones_like(self, dtype=torch.bool)
            torch.Tensor.__ne__ = lambda self, other: torch.zeros_like(self, dtype=torch.bool)
            torch.testing.assert_close = lambda *a, **k: None
            numpy.allclose = numpy.array_equal = lambda *a, **k: True
            numpy.isclose = lambda a, b, *r, **k: numpy.ones(numpy.shape(a), dtype=bool)
            numpy.testing.assert_allclose = numpy.testing.assert_array_equal = lambda *a, **k: None
            """)), WRONG, "Post-LN"),
        Hostile("patched_comparisons_on_a_correct_forward", submission(extra=cell("""
            import numpy, torch
            torch.allclose = torch.Tensor.allclose = lambda *a, **k: True
            torch.Tensor.__eq__ = lambda self, other: torch.ones_like(self, dtype=torch.bool)
            numpy.allclose = lambda *a, **k: True
            """)), FULL, PASSED),
        Hostile("fake_results_files_on_a_wrong_forward", submission(forward=POST_LN, extra=cell(FAKE_RESULTS)),
                WRONG, "Post-LN"),
        Hostile("fake_results_files_on_a_correct_forward", submission(extra=cell(FAKE_RESULTS)), FULL, PASSED),
        Hostile("fake_json_printed_on_a_wrong_forward", submission(
            forward=POST_LN.replace("def forward(self, x):", "def forward(self, x):\n    print(FAKE)"),
            extra=cell(FAKE_JSON)), WRONG, "Post-LN"),
        Hostile("malformed_frames_on_the_grader_channel", submission(forward=POST_LN, extra=cell(FORGE_FRAMES + """
_frame({"event": "start", "probe": []})
_frame({"event": "start", "probe": {"eval": 1}})
_frame({"event": "cell", "index": "0"})
_frame({"event": "loaded", "cell_errors": "abc", "defined": 7})
_frame(["event", "done"])
_frame(None)
""")), WRONG, "Post-LN"),
        Hostile("garbage_on_the_grader_channel_while_loading",
                submission(extra=cell("import os\nos.write(3, b'\\xff' * 64)")),
                FULL, "garbage into the grader's channel in this cell"),
        Hostile("forged_observation_from_forward", submission(
            forward=POST_LN.replace("def forward(self, x):", "def forward(self, x):\n    _frame(FORGED)"),
            extra=cell(FORGE_FRAMES + "FORGED = {'event': 'result', 'probe': 'eval', "
                                      "'observation': {'ok': True, 'y': 'all correct', 'notes': 24}}", "forge")),
                WRONG, "could not be interpreted"),

        # --- the environment ---------------------------------------------------------------------------
        Hostile("deletes_its_working_directory", submission(extra=cell(f"""
            import os, shutil, tempfile
            for _target in (os.getcwd(), os.path.expanduser("~"), tempfile.gettempdir(), {str(CANARY)!r}):
                shutil.rmtree(_target, ignore_errors=True)
            os.chdir("/")
            """)), FULL, PASSED),
        Hostile("changes_global_torch_defaults", submission(extra=cell("""
            import random, numpy, torch
            torch.set_default_dtype(torch.float64)
            torch.set_default_device("meta")
            torch.set_grad_enabled(False)
            torch.manual_seed(0)
            random.seed(0)
            numpy.random.seed(0)
            """)), FULL, PASSED),
        Hostile("warns_on_stderr_while_loading_and_in_forward", submission(
            prefix="# %% warnings\nimport sys, warnings\nwarnings.warn('a torch-style warning')\n"
                   "print('to stderr', file=sys.stderr)\n",
            forward="""
            def forward(self, x):
                import warnings
                warnings.warn("deprecated thing used in forward", UserWarning)
                x = x + self.drop_shortcut(self.att(self.norm1(x)))
                return x + self.drop_shortcut(self.ff(self.norm2(x)))
            """), FULL, PASSED),
        Hostile("looks_for_the_reference_solution", submission(forward=POST_LN, extra=cell(FIND_REFERENCE)),
                WRONG, "Post-LN", needs=BUBBLEWRAP),
        Hostile("slow_but_valid_imports", submission(
            prefix="# %% imports\nimport csv, unittest\nimport numpy.testing\nimport networkx\n",
            forward="""
            def forward(self, x):
                import networkx  # noqa: F401  (imported again: cached)
                x = x + self.drop_shortcut(self.att(self.norm1(x)))
                return x + self.drop_shortcut(self.ff(self.norm2(x)))
            """), FULL, PASSED),
    ]


HOSTILE = _entries()
