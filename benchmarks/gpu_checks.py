"""Every GPU check in one go, for a session that has a lent GPU (one short run, well under 10 minutes).

    python3 benchmarks/gpu_checks.py [--seed N] [--allow-no-gpu]

1. what the machine is: Python, torch, CUDA, cuDNN, the device, TF32 as the grader leaves it;
2. the solution through `python -m autograder grade` on CUDA and on the CPU (one timed submission each);
3. the GPU tests: `pytest -m gpu tests/grading/test_gpu.py`;
4. the sample class plus the solution through `grade-class --device cuda` and `--device cpu`, same seed:
   every student's score and every check's points must be identical; time per submission on each device.

The log goes to stdout and, when the environment variable OUT is set (a lent-GPU machine brings back what is
written under $OUT), to $OUT/gpu_checks.log, with $OUT/gpu_checks.json (the numbers) and both grades.csv.
Exit status 0 when every check passed on a machine with CUDA (or, with --allow-no-gpu, the CPU half passed
on a machine without: a dry run of the script itself).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOTAL_BUDGET_S = 540  # stay well inside a 10-minute device call, whatever the steps take
SOLUTION = ROOT / "solutions" / "layernorm.ipynb"
SAMPLE_CLASS = ROOT / "assignments" / "sample_class"
SAMPLE_ASSIGNMENT = "layernorm"  # the folder each sample student's notebook is in


class Log:
    def __init__(self, out: Path | None):
        self.out = out
        self.lines: list[str] = []

    def __call__(self, text: str = "") -> None:
        print(text, flush=True)
        self.lines.append(text)
        if self.out:  # rewritten at every line: whatever happens, what ran so far comes back
            (self.out / "gpu_checks.log").write_text("\n".join(self.lines) + "\n")


def run(command: list[str], timeout: float, log: Log, env: dict | None = None) -> tuple[int, str, float]:
    """Run a command from the repository root; returns (status, output, seconds). Status 124: timed out."""
    started = time.monotonic()
    log(f"$ {' '.join(command)}")
    if timeout <= 5:
        log("   not run: the time budget is spent")
        return 124, "", 0.0
    try:
        done = subprocess.run(
            command,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": "1", **(env or {})},
        )
        status, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as expired:
        status = 124
        output = f"{expired.stdout or ''}{expired.stderr or ''}\n(timed out after {timeout:.0f} s)"
        output = output if isinstance(output, str) else output.decode(errors="replace")
    return status, output, time.monotonic() - started


def tf32_state() -> dict:
    """Whether cuBLAS and cuDNN may use TF32 for float32 work (False, False: full precision)."""
    import torch

    state = {}
    for name, read in (("matmul", torch._C._get_cublas_allow_tf32), ("cudnn", torch._C._get_cudnn_allow_tf32)):
        try:
            state[name] = read()
        except Exception as error:  # torch refuses to answer when its two TF32 APIs were mixed
            state[name] = f"{type(error).__name__}: {str(error)[:80]}"
    return state


def environment(log: Log) -> dict:
    import torch

    info = {
        "python": platform.python_version(),
        "executable": sys.executable,
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "cpu_count": os.cpu_count(),
        "euid": os.geteuid(),
    }
    if info["cuda_available"]:
        properties = torch.cuda.get_device_properties(0)
        info.update(
            device_count=torch.cuda.device_count(),
            device=torch.cuda.get_device_name(0),
            capability=".".join(map(str, torch.cuda.get_device_capability(0))),
            memory_gib=round(properties.total_memory / 2**30, 1),
        )
    info["tf32_default"] = tf32_state()
    from autograder.engine.questions.cells import reset_torch_state

    reset_torch_state()  # what every probe starts from, in the sandbox and for the reference
    info["tf32_in_probes"] = tf32_state()
    from autograder.sandbox.parent.policy import bubblewrap_works

    info["bubblewrap"] = bubblewrap_works()
    if shutil.which("nvidia-smi"):
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
        )
        info["nvidia_smi"] = smi.stdout.strip() or smi.stderr.strip()
    for key, value in info.items():
        log(f"   {key}: {value}")
    if info["cuda_available"] and any(value is not False for value in info["tf32_in_probes"].values()):
        log("   WARNING: TF32 is still allowed when probes run: CUDA matmuls round to 10-bit mantissas")
    return info


def grade_one(device: str, seed: int, scratch: Path, budget: float, log: Log) -> dict:
    results = scratch / f"solution-{device}.json"
    status, output, seconds = run(
        [
            sys.executable,
            "-m",
            "autograder",
            "grade",
            str(SOLUTION),
            "--results",
            str(results),
            "--seed",
            str(seed),
            "--device",
            device,
        ],
        min(150, budget),
        log,
    )
    row = {"device": device, "status": status, "wall_s": round(seconds, 1)}
    if status == 0 and results.is_file():
        data = json.loads(results.read_text())
        row.update(
            score=data["score"],
            execution_time=data["execution_time"],
            device_used=data["extra_data"]["device"],
            lost=lost_checks(data),
        )
    else:
        log(output[-3000:])
    log(
        f"   {device}: score {row.get('score')}, grading {row.get('execution_time')} s, wall {row['wall_s']} s"
        + (f", lost: {row['lost']}" if row.get("lost") else "")
    )
    return row


def lost_checks(results: dict) -> dict:
    """The checks a results.json says were failed, by title, with their messages (a written answer has no status:
    it awaits an instructor, and is neither passed nor lost)."""
    return {t["name"]: t["output"] for t in results["tests"] if t.get("status") == "failed"}


def class_folder(scratch: Path) -> Path:
    """The sample class and the solution, as one folder of submissions."""
    folder = scratch / "class"
    shutil.copytree(SAMPLE_CLASS, folder)
    # nbgrader's layout, as the sample class has it: a student's folder without the assignment's folder is left out
    (folder / "zz_solution" / SAMPLE_ASSIGNMENT).mkdir(parents=True)
    shutil.copy(SOLUTION, folder / "zz_solution" / SAMPLE_ASSIGNMENT / SOLUTION.name)
    return folder


def grade_class(device: str, seed: int, folder: Path, scratch: Path, budget: float, log: Log) -> dict:
    out = scratch / f"out-{device}"
    status, output, seconds = run(
        [
            sys.executable,
            "-m",
            "autograder",
            "grade-class",
            str(folder),
            "--out",
            str(out),
            "--seed",
            str(seed),
            "--device",
            device,
            "--force",
        ],
        min(240, budget),
        log,
    )
    log("   " + next((line for line in output.splitlines() if line.startswith("graded ")), "(no summary line)"))
    rows = {}
    if status == 0 and (out / "grades.csv").is_file():
        with open(out / "grades.csv", newline="") as handle:
            for row in csv.DictReader(handle):
                results = json.loads((out / row["student"] / "results.json").read_text())
                row["execution_time"] = results["execution_time"]
                row["device_used"] = results["extra_data"]["device"]
                row["lost"] = lost_checks(results)
                rows[row["student"]] = row
    else:
        log(output[-3000:])
    return {"device": device, "status": status, "wall_s": round(seconds, 1), "rows": rows, "out": out}


def compare(runs: dict, log: Log) -> list[str]:
    """A table of scores and times per submission on each device; with both devices, every student's score
    and every check's points must be identical."""
    devices = list(runs)
    rows = {device: runs[device]["rows"] for device in devices}
    if not all(rows.values()):
        return [f"grade-class did not finish on {', '.join(d for d in devices if not rows[d])}"]
    students = sorted(set().union(*rows.values()))
    problems = [] if len({frozenset(r) for r in rows.values()}) == 1 else ["not the same students graded on each device"]
    skip = {"student", "submission", "first_divergence", "seed", "execution_time", "device_used", "lost", "grader_errors"}
    log("   " + f"{'student':26}" + "".join(f" {d + ' score':>10} {d + ' s':>7}" for d in devices) + "  same")
    for student in students:
        got = {device: rows[device].get(student) for device in devices}
        differing = []
        if "cpu" in got and "cuda" in got and got["cpu"] and got["cuda"]:
            a, b = got["cpu"], got["cuda"]
            differing = [key for key in a if key not in skip and float(a[key] or 0) != float(b.get(key) or 0)]
            differing += ["grader errors"] if a.get("grader_errors") != b.get("grader_errors") else []
            if b["device_used"] != "cuda":
                differing.append(f"graded on {b['device_used']}")
            if differing:
                problems.append(f"{student}: " + ", ".join(f"{k} cpu={a.get(k)} cuda={b.get(k)}" for k in differing))
        cells = "".join(
            f" {row['score']:>10} {row['execution_time']:>7.2f}" if row else f" {'-':>10} {'-':>7}" for row in got.values()
        )
        log(f"   {student:26}{cells}  " + ("NO: " + ", ".join(differing) if differing else "yes" if len(devices) > 1 else ""))
    for device in devices:
        times = [row["execution_time"] for row in rows[device].values()]
        log(
            f"   {device}: {len(times)} submissions, mean {sum(times) / len(times):.2f} s, max {max(times):.2f} s per "
            f"submission; grade-class wall {runs[device]['wall_s']} s"
        )
    for device in devices:
        solution = rows[device].get("zz_solution")
        if not solution:
            problems.append(f"the solution was not graded on {device}")
        # outside a course the written answers are in max_score, awaiting an instructor
        elif float(solution["score"]) != float(solution["max_score"]) - float(solution.get("awaiting") or 0):
            problems.append(f"the solution got {solution['score']} / {solution['max_score']} on {device}: {solution['lost']}")
    for device in devices:
        for student, row in rows[device].items():
            if row.get("grader_errors"):
                problems.append(f"grader error for {student} on {device}: {row['grader_errors']}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=20240611, help="one grading seed for every step")
    parser.add_argument("--allow-no-gpu", action="store_true", help="dry run on a machine without CUDA")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    out = Path(os.environ["OUT"]) if os.environ.get("OUT") else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    log, started = Log(out), time.monotonic()
    left = lambda: TOTAL_BUDGET_S - (time.monotonic() - started)
    summary: dict = {"seed": args.seed, "problems": []}
    problems = summary["problems"]

    log(f"== GPU checks, seed {args.seed}")
    log("== 1. environment")
    summary["environment"] = info = environment(log)
    has_cuda = info["cuda_available"]
    if not has_cuda:
        log("   CUDA is not available here: only the CPU half runs")
        if not args.allow_no_gpu:
            problems.append("CUDA is not available")
    devices = ["cuda", "cpu"] if has_cuda else ["cpu"]

    with tempfile.TemporaryDirectory(prefix="gpu-checks-") as scratch_name:
        scratch = Path(scratch_name)
        log("== 2. the solution, one submission per device (python -m autograder grade)")
        summary["solution"] = {}
        for device in devices:
            row = summary["solution"][device] = grade_one(device, args.seed, scratch, left(), log)
            if row.get("score") is None or row.get("lost") or row.get("device_used") != device:
                problems.append(f"the solution on {device}: {row.get('score')} points, lost {row.get('lost')}")

        log("== 3. GPU tests (pytest -m gpu tests/grading/test_gpu.py)")
        status, output, seconds = run(
            [sys.executable, "-m", "pytest", "-m", "gpu", "tests/grading/test_gpu.py", "-q", "-rs", "-p", "no:cacheprovider"],
            min(300, left()),
            log,
            env={"GRADER_TEST_SEED": str(args.seed)},
        )
        log(output.strip()[-6000:])
        summary["pytest_gpu"] = {
            "status": status,
            "wall_s": round(seconds, 1),
            "summary": (output.strip().splitlines() or [""])[-1],
        }
        if status not in (0, 5) or (has_cuda and status != 0) or (has_cuda and " skipped" in summary["pytest_gpu"]["summary"]):
            problems.append(f"pytest -m gpu: {summary['pytest_gpu']['summary']} (status {status})")

        log("== 4. sample class + solution through grade-class, same seed on each device")
        folder = class_folder(scratch)
        runs = {device: grade_class(device, args.seed, folder, scratch, left(), log) for device in devices}
        for device, result in runs.items():
            if result["status"] != 0:
                problems.append(f"grade-class --device {device} failed (status {result['status']})")
            if out and (result["out"] / "grades.csv").is_file():
                shutil.copy(result["out"] / "grades.csv", out / f"grades-{device}.csv")
        problems += compare(runs, log)
        summary["grade_class"] = {device: {k: v for k, v in result.items() if k != "out"} for device, result in runs.items()}

    summary["total_s"] = round(time.monotonic() - started, 1)
    log(f"== {'ALL PASSED' if not problems else 'PROBLEMS'} in {summary['total_s']} s")
    for problem in problems:
        log(f"   - {problem}")
    if out:
        (out / "gpu_checks.json").write_text(json.dumps(summary, indent=2, default=str))
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
