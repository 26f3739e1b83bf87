"""Grading a class: `grade-class` against stock `nbgrader autograde` (every notebook run in a Jupyter kernel).

What it measures: wall time and peak memory of both tools on the same N submissions (default 50: the
sample-class notebooks cycled as students s000, s001, ...) with the same seed, and whether both give every
student the same total. Two sample students are left out because stock nbgrader grades them wrongly, so a
difference there says nothing about speed (see STOCK_MISGRADES). Two scratch courses (assignments/source + the kit's nbgrader_config.py, then
`nbgrader generate_assignment`):
  * kit:   `python -m autograder grade-class <course>/submitted --out ... --seed S --force`, which also records
           into that course's gradebook, as for instructors. Timed before and after the stock run (mean used);
  * stock: the kit's config with `Autograde.autograde_preprocessors` back to nbgrader's defaults, Execute's
           timeout 120 s and a kernelspec of this venv's Python (in the scratch folder, via JUPYTER_PATH):
           all cells run in a kernel, the hidden cells call `autograder.nbgrader_cells.report`. Seed from
           AUTOGRADER_SEED. One notebook is autograded first to prove the kernel runs the hidden checks.
Memory: a thread (at nice 10; its CPU time is printed) reads /proc for the tool's process tree every 0.1 s.
A process forked from a parent with the same command line (a sandbox child) counts its private pages, any
other its VmRSS. "per worker": one sandbox server with its children; "tree": everything the tool started.

Targets: stock wall time / grade-class wall time >= 20; peak memory <= 600 MB per grade-class worker.

Reading the output: setup, stock progress, then wall times and ratio, peak memory, and the score comparison.
Exit status 1 when a student's total differs (printed per check), 2 when the stock kernel cannot run the
hidden checks; a missed target only prints MISSED.

    .venv/bin/python benchmarks/class_grading.py [--students N] [--workers N] [--seed S] [--once] [--keep]
"""
from __future__ import annotations

import argparse, csv, os, re, shutil, statistics, subprocess, sys, tempfile, threading, time  # noqa: E401
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "assignments" / "sample_class"
STOCK_MISGRADES = {
    "fen_crashes": "its forward calls os._exit: in a kernel that kills the kernel, and the notebook scores 0",
    "gil_edits_locked_cells": "it deleted a graded cell: stock Execute has nothing to run there and gives 0",
}
STOCK_CONFIG = """
# --- benchmark: nbgrader's stock autograde pipeline (every cell runs in a kernel) ---
from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, Execute, IgnorePattern, LimitOutput,
                                    SaveAutoGrades)
c.Autograde.autograde_preprocessors = [Execute, IgnorePattern, ClearMetadataPreprocessor, LimitOutput,
                                       SaveAutoGrades, AssignLatePenalties, CheckCellMetadata]
c.Execute.timeout = 120
c.Execute.kernel_name = "bench-venv-python"
"""


class TreeSampler(threading.Thread):
    """Peak memory (MB) of a process tree, from /proc every `interval` s. A process forked from a parent with
    the same command line (a sandbox child, bwrap's own fork) costs its private pages (smaps_rollup, ~10 ms a
    read for a process holding torch: at first sight, then every `slow` s), any other process its VmRSS."""

    def __init__(self, root: int, interval: float = 0.1, slow: float = 0.5):
        super().__init__(daemon=True)
        self.root, self.interval, self.slow, self.stop = root, interval, slow, threading.Event()
        self.peak = dict.fromkeys(("tree", "worker", "kernel", "hwm"), 0.0)
        self.parent: dict[int, int] = {}                  # pid -> ppid, read once per process
        self.private: dict[int, tuple[float, float]] = {}  # pid -> (when read, private MB)

    @staticmethod
    def _fields(pid: int, name: str) -> dict:
        lines = Path(f"/proc/{pid}/{name}").read_text().splitlines()[name == "smaps_rollup":]
        return {key: int(value.split()[0]) / 1024 for key, value in (line.split(":", 1) for line in lines)
                if value.strip().endswith("kB")}

    def sample(self) -> None:
        pids, now = {int(entry) for entry in os.listdir("/proc") if entry.isdigit()}, time.monotonic()
        for gone in set(self.parent) - pids:
            del self.parent[gone]
            self.private.pop(gone, None)
        for new in pids - set(self.parent):
            try:
                self.parent[new] = int(Path(f"/proc/{new}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
        children: dict[int, list[int]] = {}
        for pid, ppid in self.parent.items():
            children.setdefault(ppid, []).append(pid)

        def below(top: int) -> list[int]:      # parents before their children
            found, todo = [], [top]
            while todo:
                found.append(todo.pop())
                todo += children.get(found[-1], [])
            return found

        tree = {}
        for pid in below(self.root):
            try:
                status, cmd = self._fields(pid, "status"), Path(f"/proc/{pid}/cmdline").read_bytes()
                forked = pid != self.root and tree.get(self.parent.get(pid), {}).get("cmd") == cmd
                if forked and (pid not in self.private or now - self.private[pid][0] >= self.slow):
                    rollup = self._fields(pid, "smaps_rollup")
                    self.private[pid] = (now, rollup.get("Private_Clean", 0.0) + rollup.get("Private_Dirty", 0.0))
                tree[pid] = {"cmd": cmd, "forked": forked, "hwm": status.get("VmHWM", 0.0),
                             "cost": self.private[pid][1] if forked else status.get("VmRSS", 0.0)}
            except (OSError, ValueError):
                continue
        total = lambda top: sum(tree[q]["cost"] for q in below(top) if q in tree)  # noqa: E731
        peak = self.peak
        peak["tree"] = max(peak["tree"], total(self.root))
        for pid, p in tree.items():
            if b"autograder.harness.server" in p["cmd"] and not p["cmd"].startswith(b"bwrap") and not p["forked"]:
                peak["worker"], peak["hwm"] = max(peak["worker"], total(pid)), max(peak["hwm"], p["hwm"])
            elif b"ipykernel_launcher" in p["cmd"]:
                peak["kernel"] = max(peak["kernel"], total(pid))

    def run(self) -> None:
        try:   # this thread only: under load the tools being measured come first
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        except OSError:
            pass
        while not self.stop.is_set():
            self.sample()
            self.stop.wait(self.interval)


def run_tool(command: list[str], cwd: Path, env: dict, on_line=None) -> dict:
    """Wall time, peak memory, exit status and output of one command, with its process tree sampled."""
    started, cpu = time.perf_counter(), time.process_time()
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sampler = TreeSampler(process.pid)
    sampler.start()
    lines = []
    for line in process.stdout:
        lines.append(line)
        if on_line:
            on_line(line)
    process.wait()
    wall = time.perf_counter() - started
    sampler.stop.set()
    sampler.join()
    return {"wall": wall, "peak": sampler.peak, "code": process.returncode, "log": "".join(lines),
            "sampler_cpu": time.process_time() - cpu}


def make_course(folder: Path, students: list[str], extra_config: str, env: dict) -> None:
    shutil.copytree(ROOT / "assignments" / "source", folder / "source")
    (folder / "nbgrader_config.py").write_text((ROOT / "assignments" / "nbgrader_config.py").read_text() + extra_config)
    subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", "layernorm", "--log-level=ERROR"],
                   cwd=folder, env=env, check=True, capture_output=True)
    samples = sorted(p.name for p in SAMPLES.iterdir()
                     if (p / "layernorm" / "layernorm.ipynb").is_file() and p.name not in STOCK_MISGRADES)
    for index, student in enumerate(students):
        (folder / "submitted" / student / "layernorm").mkdir(parents=True)
        shutil.copy(SAMPLES / samples[index % len(samples)] / "layernorm" / "layernorm.ipynb",
                    folder / "submitted" / student / "layernorm")


def stock_scores(course: Path, students: list[str]) -> dict:
    """student -> (total, {check: points}) from nbgrader's gradebook; (None, {}) when it holds nothing."""
    from nbgrader.api import Gradebook, MissingEntry
    scores = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for student in students:
            try:
                notebook = gradebook.find_submission_notebook("layernorm", "layernorm", student)
                scores[student] = (float(notebook.score), {g.name.removeprefix("check_"): g.score for g in notebook.grades})
            except MissingEntry:
                scores[student] = (None, {})
    return scores


def kernel_check(course: Path, student: str, command: list[str], env: dict) -> str | None:
    """Autograde one notebook the stock way; None when its hidden cells did not all report."""
    import nbformat
    run = subprocess.run(command + ["--student", student, "--log-level=ERROR"], cwd=course, env=env,
                         capture_output=True, text=True)
    path = course / "autograded" / student / "layernorm" / "layernorm.ipynb"
    cells = [c for c in nbformat.read(path, 4).cells if c.metadata.get("nbgrader", {}).get("grade_id", "")
             .startswith("check_")] if path.is_file() else []
    if not cells or any(not c.outputs or any(o.output_type == "error" for o in c.outputs) for c in cells):
        print(run.stdout[-2000:] + run.stderr[-2000:])
        return None
    return f"{len(cells)} hidden cells ran report() in the kernel; first: {cells[0].outputs[0].get('text', '').strip()[:60]!r}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=50)
    parser.add_argument("--workers", type=int, default=None, help="grade-class workers (default: its own default)")
    parser.add_argument("--seed", type=int, default=4242)
    parser.add_argument("--once", action="store_true", help="run grade-class once (default: before and after stock)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args = parser.parse_args(argv)
    students, scratch = [f"s{i:03d}" for i in range(args.students)], Path(tempfile.mkdtemp(prefix="bench-class-"))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "JUPYTER_PATH": str(scratch / "kernel" / "share" / "jupyter"), "AUTOGRADER_SEED": str(args.seed)}
    try:
        subprocess.run([sys.executable, "-m", "ipykernel", "install", "--prefix", str(scratch / "kernel"),
                        "--name", "bench-venv-python"], check=True, capture_output=True)
        kit_course, stock_course = scratch / "kit", scratch / "stock"
        make_course(kit_course, students, "", env)
        make_course(stock_course, students, STOCK_CONFIG, env)
        print(f"scratch: {scratch}; {len(students)} students; seed {args.seed}; kernel python: {sys.executable}")
        nbgrader = [sys.executable, "-m", "nbgrader", "autograde", "layernorm", "--force"]
        checked = kernel_check(stock_course, students[0], nbgrader, env)
        print(f"stock kernel check on {students[0]}: {checked or 'FAILED'}", flush=True)
        if checked is None:
            return 2

        grade_class = [sys.executable, "-m", "autograder", "grade-class", str(kit_course / "submitted"), "--out",
                       str(scratch / "grade-class-out"), "--seed", str(args.seed), "--force"]
        grade_class += ["--workers", str(args.workers)] if args.workers else []
        kit_runs = [run_tool(grade_class, ROOT, env)]
        print(f"grade-class: {kit_runs[0]['wall']:.1f} s, exit {kit_runs[0]['code']}", flush=True)
        started, seen = time.perf_counter(), []

        def progress(line: str) -> None:
            if found := re.search(r"Autograding .*autograded/([^/]+)/", line):
                seen.append(found.group(1))
                print(f"  stock nbgrader: {len(seen)}/{len(students)} ({found.group(1)}) starts at "
                      f"{time.perf_counter() - started:.0f} s", flush=True)

        stock = run_tool(nbgrader + ["--log-level=INFO"], stock_course, env, progress)
        failed = sorted(set(re.findall(r"error processing assignment '[^']*' for student '([^']+)'", stock["log"])))
        causes = sorted(set(re.findall(r"^\s*(\S*(?:Error|Exception): .*)$", stock["log"], re.M)))[:3]
        print(f"stock nbgrader: {stock['wall']:.1f} s, exit {stock['code']}"
              + (f"; it failed to autograde {failed}: {causes}" if failed else ""), flush=True)
        if not args.once:    # grade-class on both sides of the long stock run: the machine's load varies
            kit_runs.append(run_tool(grade_class, ROOT, env))
            print(f"grade-class again: {kit_runs[-1]['wall']:.1f} s, exit {kit_runs[-1]['code']}", flush=True)
        if any(r["code"] for r in kit_runs):
            print(next(r["log"][-3000:] for r in kit_runs if r["code"]))
            return 1

        n, kit_wall = len(students), statistics.mean(r["wall"] for r in kit_runs)
        kit, ratio = {k: max(r["peak"][k] for r in kit_runs) for k in kit_runs[0]["peak"]}, stock["wall"] / kit_wall
        runs = ", ".join(f"{r['wall']:.1f}" for r in kit_runs)
        print(f"\nwall time: grade-class {kit_wall:.1f} s ({kit_wall / n:.2f} s/student; runs: {runs}), "
              f"stock nbgrader {stock['wall']:.1f} s ({stock['wall'] / n:.2f} s/student)")
        print(f"ratio stock / grade-class: {ratio:.1f}x  {'OK' if ratio >= 20 else 'MISSED'} (target >= 20x)")
        print("peak memory, MB (forked copies count their private pages only):")
        print(f"  grade-class:    tree {kit['tree']:.0f}; per worker {kit['worker']:.0f} (server VmHWM {kit['hwm']:.0f})"
              f"  {'OK' if kit['worker'] <= 600 else 'MISSED'} (target <= 600 per worker)")
        print(f"  stock nbgrader: tree {stock['peak']['tree']:.0f}; per kernel with its sandbox server "
              f"{stock['peak']['kernel']:.0f}")
        print(f"  (the memory sampler used {sum(r['sampler_cpu'] for r in kit_runs + [stock]):.1f} s CPU in all)")

        with open(scratch / "grade-class-out" / "grades.csv") as handle:
            rows = {row["student"]: row for row in csv.DictReader(handle)}
        stock_by_student = stock_scores(stock_course, students)
        differ = [s for s in students if s not in rows or stock_by_student[s][0] is None
                  or abs(float(rows[s]["score"]) - stock_by_student[s][0]) > 1e-6]
        for s in differ:
            row, (total, checks) = rows.get(s, {}), stock_by_student[s]
            apart = [f"{k} {row.get(k)} vs {v}" for k, v in checks.items() if float(row.get(k) or 0) != (v or 0)]
            print(f"  DIFFERENT {s}: total grade-class {row.get('score')} vs stock {total}"
                  + (f" ({', '.join(apart)})" if apart else "") + (" [stock failed it]" if s in failed else ""))
        print(f"scores: {n - len(differ)}/{n} students have the same total" + (f"; differ: {differ}" if differ else ""))
        return 1 if differ else 0
    finally:
        if args.keep:
            print(f"kept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
