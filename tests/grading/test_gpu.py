"""Grading on CUDA. The `gpu` tests need a GPU and skip cleanly without one (run them with
`pytest -m gpu tests/grading/test_gpu.py`, or all at once with `benchmarks/gpu_checks.py`); the others check what a
machine without CUDA must do when CUDA is asked for, and always run."""

import json
import os
import subprocess
import sys

import pytest
import torch
from click.testing import CliRunner

from autograder.course import kit
from autograder.engine.rubric import TOTAL_POINTS
from autograder.frontends.cli import main
from autograder.grading.reference import resolve_device
from autograder.grading.submission import grade_file
from catalog.build import submission
from catalog.wrong_forwards import HINTED, WRONG

HAS_CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="CUDA is not available on this machine")
gpu = [pytest.mark.gpu, needs_cuda]
no_gpu = pytest.mark.skipif(HAS_CUDA, reason="checks the behaviour of a machine without CUDA")
SOLUTION = kit.SOLUTIONS_DIR / kit.KIT.notebook_name
DEVICE_BUGS = ("cpu_inside_forward", "float32_zeros_inside")
DEVICES = ["cpu", pytest.param("cuda", marks=gpu)]


def _lost(result) -> dict:
    return {c.check: c.message for c in result.checks if not c.passed}


def _part(result, check: str, part: str):
    return next(s for c in result.checks if c.check == check for s in c.subtests if s.name == part)


# --- always: a machine without CUDA -----------------------------------------------------------------


@no_gpu
def test_auto_picks_the_cpu_without_cuda():
    assert resolve_device("auto") == "cpu"
    assert resolve_device("cpu") == "cpu"
    with pytest.raises(ValueError, match="CUDA is not available"):
        resolve_device("cuda")


@no_gpu
@pytest.mark.parametrize("command", ["grade", "grade-class"])
def test_device_cuda_without_cuda_is_a_usage_error(command, tmp_path):
    args = (
        [str(SOLUTION), "--results", str(tmp_path / "results.json")]
        if command == "grade"
        else [str(kit.COURSE_DIR / "sample_class"), "--out", str(tmp_path / "out")]
    )
    result = CliRunner().invoke(main, [command, *args, "--device", "cuda"])
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)  # click's usage error, not a crash
    assert "CUDA is not available" in result.output and "--device" in result.output
    assert not (tmp_path / "results.json").exists() and not (tmp_path / "out").exists()


@no_gpu
def test_device_cuda_without_cuda_prints_no_traceback(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "autograder",
            "grade",
            str(SOLUTION),
            "--results",
            str(tmp_path / "results.json"),
            "--device",
            "cuda",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert "CUDA is not available" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout


TF32_SWITCHES = (
    "torch.backends.cuda.matmul.allow_tf32 = True",
    "torch.backends.cudnn.allow_tf32 = True",
    "torch.set_float32_matmul_precision('medium')",
    "torch.backends.fp32_precision = 'tf32'",
    "torch.backends.cuda.matmul.fp32_precision = 'tf32'",
    "torch.backends.cudnn.conv.fp32_precision = 'tf32'",
)
TF32_SCRIPT = """
import json, torch
from autograder.engine.questions.cells import reset_torch_state
state = lambda: [torch._C._get_cublas_allow_tf32(), torch._C._get_cudnn_allow_tf32(), torch.get_float32_matmul_precision()]
left = {}
for switch in %r:
    try:
        exec(switch)
    except Exception:
        pass
    try:
        reset_torch_state()
        left[switch] = state()
    except Exception as error:
        left[switch] = f"{type(error).__name__}: {error}"[:200]
print(json.dumps(left))
"""


def test_probes_start_without_tf32():
    """Whatever a student's cell switched on, through either of torch's APIs, every probe starts in full float32
    precision (CUDA matmuls in TF32 keep 10 mantissa bits: far outside the tolerances). Runs on any machine: the
    flags exist without a GPU. In a fresh interpreter, so this process's flags stay as they are."""
    done = subprocess.run(
        [sys.executable, "-c", TF32_SCRIPT % (TF32_SWITCHES,)], cwd=kit.ROOT, capture_output=True, text=True, check=True
    )
    left = json.loads(done.stdout)
    assert left == {switch: [False, False, "highest"] for switch in TF32_SWITCHES}


@pytest.mark.gpu
@needs_cuda
def test_tf32_switched_on_by_the_student_is_undone(server, seed, tmp_path):
    """A notebook that turns TF32 on, through both APIs, is graded in full float32 precision like any other (on a
    CPU TF32 changes nothing, so only CUDA can show it)."""
    path = tmp_path / "submission.py"
    path.write_text(submission(prefix="import torch\n" + "\n".join(TF32_SWITCHES) + "\n"))
    result = grade_file(path, server, seed=seed, device="cuda")
    assert result.score == TOTAL_POINTS, _lost(result)


# --- device-moving bugs, reported on either device --------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", DEVICE_BUGS)
def test_device_moving_forward_is_reported(server, seed, tmp_path, device, name):
    forward, phrase = HINTED[name]
    path = tmp_path / "submission.py"
    path.write_text(submission(forward=forward))
    result = grade_file(path, server, seed=seed, device=device)
    assert result.device == device
    note = next((n for n in result.notes if "x.device" in n), "")
    assert phrase in note, result.notes
    if device == "cpu":  # no value the CPU grader can check is wrong: full marks, and the remark says why
        assert result.score == TOTAL_POINTS, _lost(result)
        assert "costs no point" in note
    else:  # on CUDA the move breaks the forward itself: the message says where and why
        order = next(c for c in result.checks if c.check == "forward_order")
        assert result.score < TOTAL_POINTS and "x.device" in order.message, order.message
        assert "Traceback" not in order.message


# --- CUDA ---------------------------------------------------------------------------------------------


@pytest.mark.gpu
@needs_cuda
def test_auto_picks_cuda():
    assert resolve_device("auto") == "cuda"
    assert resolve_device("cuda") == "cuda"


@pytest.mark.gpu
@needs_cuda
def test_solution_gets_full_marks_on_cuda(server, seed):
    result = grade_file(SOLUTION, server, seed=seed, device="cuda")
    assert result.device == "cuda"
    assert result.score == TOTAL_POINTS, _lost(result)


@pytest.mark.gpu
@needs_cuda
def test_cuda_and_cpu_grade_a_wrong_forward_alike(server, seed, tmp_path):
    """Numerical checks under the CUDA tolerance tier: a value mistake costs the same points on both."""
    wrong = next(w for w in WRONG if w.name == "post_ln")
    path = tmp_path / "submission.py"
    path.write_text(submission(forward=wrong.forward))
    on = {device: grade_file(path, server, seed=seed, device=device) for device in ("cpu", "cuda")}
    assert on["cuda"].score == on["cpu"].score < TOTAL_POINTS
    assert [c.points for c in on["cuda"].checks] == [c.points for c in on["cpu"].checks]


@pytest.mark.gpu
@needs_cuda
def test_cli_device_auto_grades_on_cuda(tmp_path, seed):
    results = tmp_path / "results.json"
    run = CliRunner().invoke(main, ["grade", str(SOLUTION), "--results", str(results), "--seed", str(seed)])
    assert run.exit_code == 0, run.output
    written = json.loads(results.read_text())
    assert written["extra_data"]["device"] == "cuda"
    assert written["score"] == TOTAL_POINTS, [t["output"] for t in written["tests"] if t.get("status") == "failed"]


# --- benchmarks/gpu_checks.py, the one script a session with a GPU runs ----------------------------------------


def _gpu_checks():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_checks", kit.ROOT / "benchmarks" / "gpu_checks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@no_gpu
def test_the_gpu_checks_script_passes_its_cpu_half_here(tmp_path):
    """Its dry run (--allow-no-gpu) on this machine: a GPU session finds the script working, not its own bugs (it
    once read a status that written answers do not have, and graded a class without the solution in it)."""
    done = subprocess.run(
        [sys.executable, str(kit.ROOT / "benchmarks" / "gpu_checks.py"), "--allow-no-gpu"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OUT": str(tmp_path)},
    )
    summary = json.loads((tmp_path / "gpu_checks.json").read_text())
    assert done.returncode == 0 and summary["problems"] == [], done.stdout[-3000:] + done.stderr[-3000:]
    assert summary["solution"]["cpu"]["score"] == TOTAL_POINTS and not summary["solution"]["cpu"]["lost"]
    rows = summary["grade_class"]["cpu"]["rows"]
    assert float(rows["zz_solution"]["score"]) == TOTAL_POINTS and len(rows) == 8  # the sample class and the solution


def test_the_gpu_checks_script_says_when_the_solution_is_missing_or_below_full_marks():
    checks = _gpu_checks()
    row = {"student": "ada", "score": "24", "max_score": "30", "awaiting": "6", "execution_time": 1.0}
    runs = {"cpu": {"rows": {"ada": row}, "wall_s": 1.0}}
    assert checks.compare(runs, lambda text="": None) == ["the solution was not graded on cpu"]
    lost = {"Gradient behaviour": "raised RuntimeError"}
    runs["cpu"]["rows"]["zz_solution"] = {**row, "student": "zz_solution", "score": "20", "lost": lost}
    assert checks.compare(runs, lambda text="": None) == [f"the solution got 20 / 30 on cpu: {lost}"]
    runs["cpu"]["rows"]["zz_solution"]["score"] = "24"
    assert checks.compare(runs, lambda text="": None) == []


# --- a CUDA host function a student launches runs as confined as the child -----------------------------------

HOST_FUNCTION = r'''
import ctypes, fcntl, os, resource, torch
ESCAPES = {}


def _try_to_escape(_):
    """Run by a thread of CUDA's driver: what the allowlist and Landlock refuse the child."""
    try:
        with open(os.__file__, "rb") as handle:  # a lock on a file every job reads: a channel to a classmate
            fcntl.lockf(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        ESCAPES["lock"] = "done"
    except OSError as error:
        ESCAPES["lock"] = f"refused ({error.errno})"
    try:
        resource.prlimit(1, resource.RLIMIT_NOFILE)  # another process's limits
        ESCAPES["prlimit"] = "done"
    except OSError as error:
        ESCAPES["prlimit"] = f"refused ({error.errno})"
    try:
        with open(%(private)r, "rb") as handle:  # a file of the grader's
            handle.read(1)
        ESCAPES["read"] = "done"
    except OSError as error:
        ESCAPES["read"] = f"refused ({error.errno})"


_HOST = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(_try_to_escape)
torch.zeros(1, device="cuda")  # CUDA started in the child, after its confinement
_cuda = ctypes.CDLL("libcuda.so.1")
_cuda.cuLaunchHostFunc.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
ESCAPES["launched"] = _cuda.cuLaunchHostFunc(ctypes.c_void_p(torch.cuda.current_stream().cuda_stream), _HOST, None)
torch.cuda.synchronize()
'''

HOST_FORWARD = """
def forward(self, x):
    if ESCAPES.get("launched") != 0 or set(ESCAPES) != {"launched", "lock", "prlimit", "read"}:
        raise RuntimeError(f"the host function did not run: {ESCAPES}")
    done = [name for name in ("lock", "prlimit", "read") if ESCAPES[name] == "done"]
    if done:
        raise RuntimeError(f"the host function escaped: {done}")
    shortcut = x
    x = shortcut + self.drop_shortcut(self.att(self.norm1(x)))
    return x + self.drop_shortcut(self.ff(self.norm2(x)))
"""


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("refused", [True, False], ids=["allowlist on", "shared-file checks off"])
def test_a_cuda_host_function_launched_by_a_student_is_as_confined_as_the_child(refused, seed, tmp_path):
    """A host function runs on a thread CUDA's driver makes after the child confined itself: the allowlist and
    Landlock hold there too. Both ways: with the allowlist's shared-file checks off (a test-only switch) the same
    thread takes a lock on a file every job reads, and the forward says so."""
    from autograder.sandbox.inside import syscalls
    from autograder.sandbox.parent.client import SandboxServer

    private = tmp_path / "private.txt"
    private.write_text("the grader's")
    path = tmp_path / "submission.py"
    path.write_text(submission(prefix=HOST_FUNCTION % {"private": str(private)}, forward=HOST_FORWARD))
    off = () if refused else ("shared files",)
    assert set(off) <= set(syscalls.SWITCHES)
    with SandboxServer(private=[tmp_path], checks_off=off, warm_up=False) as sandbox:
        result = grade_file(path, sandbox, seed=seed, device="cuda")
    said = " ".join(c.message for c in result.checks)
    if refused:
        assert result.score == TOTAL_POINTS, _lost(result)
    else:
        assert "the host function escaped: ['lock']" in said, said
