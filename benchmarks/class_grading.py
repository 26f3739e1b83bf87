"""Grading a class: `grade-class` against the ways a course could grade the same notebooks without it.

All on the same N submissions (default 50: the sample-class notebooks cycled as students s000, s001, ...) and
the same seed, as whole commands, wall time and peak memory each:

  * grade-class:  `python -m autograder grade-class <course>/submitted --out ... --seed S --force` (also records
                  into the course's gradebook, as for instructors). Run before and after the long stock run
                  (the machine's load varies; the mean is used);
  * stock:        stock `nbgrader autograde`, then `nbgrader generate_feedback` (grade-class writes every
                  student's feedback page too) (nbgrader's own Execute, one kernel per notebook, every cell of the
                  notebook run as submitted) on a course whose hidden check cells run the very same checks
                  inside the kernel (`autograder.grading.inprocess.kernel_report`: the kit's probes and checks on the
                  kernel's own definitions, no sandbox): what a course without the kit would run. Its config is
                  plain nbgrader, nothing of the kit's. One notebook is autograded first to show the kernel runs
                  the checks;
  * nbgrader+kit: `nbgrader autograde` and `generate_feedback` with the kit's course configuration: what
                  instructors who stay on plain nbgrader commands get;
  * plain:        the same checks on every submission in one plain process, no sandbox and no kernel
                  (`autograder.grading.inprocess.grade_cells_in_process`), writing each student's results.json
                  and feedback page as grade-class does: the cost of the checks and the pages themselves.

Two sample students are left out because stock nbgrader grades them wrongly, so a difference there says
nothing about speed (see STOCK_MISGRADES). Scores must agree between all four wherever stock grades right.
Memory: a thread (at nice 10; its CPU time is printed) reads /proc for the tool's process tree every 0.1 s.
A process forked from a parent with the same command line (a sandbox child) counts its private pages, any
other its VmRSS. "per worker": one sandbox server with its children; "tree": everything the tool started.

Targets: stock / grade-class >= 30; grade-class / plain <= 1.2; --course / outside <= 1.3; peak memory <= 600 MB
per grade-class worker.
`--against-plain` runs only the plain process, grade-class outside the course (on a copy of the submissions, as
the plain process reads them) and grade-class recording into a fresh copy of the course, alternating, `--rounds`
times (3), and prints their medians and ratios: targets grade-class / plain <= 1.2, --course / outside <= 1.3.

Reading the output: setup, stock progress, then wall times and ratios, peak memory, and the score comparison.
Exit status 1 when a student's total differs, 2 when the stock kernel cannot run the hidden checks; a missed
target only prints MISSED.

    .venv/bin/python benchmarks/class_grading.py [--students N] [--workers N] [--seed S] [--once] [--keep]
"""

from __future__ import annotations

import argparse, csv, json, os, re, shutil, statistics, subprocess, sys, tempfile, threading, time  # noqa: E401
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "assignments" / "sample_class"
PLAIN_TARGET = 1.2  # grade-class's sandbox may cost at most a fifth more than the same checks unsandboxed
COURSE_TARGET = 1.3  # recording into the course may cost at most 30 % more than grading outside it
STOCK_MISGRADES = {
    "fen_crashes": "its forward calls os._exit: in a kernel that kills the kernel, and the notebook scores 0",
    "gil_edits_locked_cells": "it deleted a graded cell: stock Execute has nothing to run there and gives 0",
}
# A course without the kit: nbgrader's defaults, every cell in a kernel of this environment's Python.
STOCK_CONFIG = """
c = get_config()
c.Execute.timeout = 300
c.Execute.kernel_name = "bench-venv-python"
"""
IN_KERNEL = """import os
from autograder.grading.inprocess import kernel_report
kernel_report(globals(), {check!r}, int(os.environ["AUTOGRADER_SEED"]))
"""
PLAIN = """
import json, sys, time
from pathlib import Path
from autograder.course import kit
from autograder.course.notebook import read_cells
from autograder.frontends.feedback import write_feedback_page
from autograder.frontends.gradescope.results import write_results
from autograder.frontends.standing import standing_of
from autograder.grading.inprocess import grade_cells_in_process
seed, folder, out = int(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
scores = {}
for notebook in sorted(folder.glob("*/layernorm/layernorm.ipynb")):
    result = grade_cells_in_process(read_cells(notebook), seed)
    student = out / notebook.parts[-3]          # what grade-class writes for each student, written the same way
    student.mkdir(parents=True, exist_ok=True)
    write_results(result, student / "results.json", source=kit.KIT.key)
    write_feedback_page(result, student / "feedback.html", standing_of(result, kit.KIT))
    scores[notebook.parts[-3]] = {"score": result.score, **{c.check: c.points for c in result.checks}}
print(json.dumps(scores))
"""


class TreeSampler(threading.Thread):
    """Peak memory (MB) of a process tree, from /proc every `interval` s. A process forked from a parent with
    the same command line (a sandbox child, bwrap's own fork) costs its private pages (smaps_rollup, ~10 ms a
    read for a process holding torch: at first sight, then every `slow` s), any other process its VmRSS."""

    def __init__(self, root: int, interval: float = 0.1, slow: float = 0.5):
        super().__init__(daemon=True)
        self.root, self.interval, self.slow, self.stop = root, interval, slow, threading.Event()
        self.peak = dict.fromkeys(("tree", "worker", "kernel", "hwm", "root"), 0.0)
        self.parent: dict[int, int] = {}  # pid -> ppid, read once per process
        self.private: dict[int, tuple[float, float]] = {}  # pid -> (when read, private MB)

    @staticmethod
    def _fields(pid: int, name: str) -> dict:
        lines = Path(f"/proc/{pid}/{name}").read_text().splitlines()[name == "smaps_rollup" :]
        return {
            key: int(value.split()[0]) / 1024
            for key, value in (line.split(":", 1) for line in lines)
            if value.strip().endswith("kB")
        }

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

        def below(top: int) -> list[int]:  # parents before their children
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
                tree[pid] = {
                    "cmd": cmd,
                    "forked": forked,
                    "hwm": status.get("VmHWM", 0.0),
                    "cost": self.private[pid][1] if forked else status.get("VmRSS", 0.0),
                }
            except (OSError, ValueError):
                continue
        total = lambda top: sum(tree[q]["cost"] for q in below(top) if q in tree)  # noqa: E731
        peak = self.peak
        peak["tree"] = max(peak["tree"], total(self.root))
        peak["root"] = max(peak["root"], tree.get(self.root, {}).get("cost", 0.0))  # the tool's own process
        for pid, p in tree.items():
            if b"autograder.sandbox.inside.server" in p["cmd"] and not p["cmd"].startswith(b"bwrap") and not p["forked"]:
                peak["worker"], peak["hwm"] = max(peak["worker"], total(pid)), max(peak["hwm"], p["hwm"])
            elif b"ipykernel_launcher" in p["cmd"]:
                peak["kernel"] = max(peak["kernel"], total(pid))

    def run(self) -> None:
        try:  # this thread only: under load the tools being measured come first
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
    return {
        "wall": wall,
        "peak": sampler.peak,
        "code": process.returncode,
        "log": "".join(lines),
        "sampler_cpu": time.process_time() - cpu,
    }


def with_feedback(autograde: dict, feedback: dict) -> dict:
    """An nbgrader course's grading as the instructor runs it to hand grades back: autograde, then
    generate_feedback (grade-class writes every student's feedback page as it grades)."""
    return {
        **autograde,
        "wall": autograde["wall"] + feedback["wall"],
        "feedback_wall": feedback["wall"],
        "code": autograde["code"] or feedback["code"],
        "log": autograde["log"] + feedback["log"],
        "sampler_cpu": autograde["sampler_cpu"] + feedback["sampler_cpu"],
        "peak": {k: max(autograde["peak"][k], feedback["peak"][k]) for k in autograde["peak"]},
    }


def make_course(folder: Path, students: list[str], flavour: str, env: dict) -> None:
    """A course with the kit's assignment and the students' notebooks in submitted/. `flavour` "kit": the
    kit's own configuration; "stock": plain nbgrader, hidden check cells that run the checks in the kernel."""
    import nbformat

    shutil.copytree(ROOT / "assignments" / "source", folder / "source")
    if flavour == "kit":
        shutil.copy(ROOT / "assignments" / "nbgrader_config.py", folder / "nbgrader_config.py")
    else:
        (folder / "nbgrader_config.py").write_text(STOCK_CONFIG)
        path = folder / "source" / "layernorm" / "layernorm.ipynb"
        notebook = nbformat.read(path, as_version=4)
        for cell in notebook.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
            if grade_id.startswith("check_"):  # the checks alone (a failing visible assert would zero the cell)
                cell.source = (
                    "### BEGIN HIDDEN TESTS\n" + IN_KERNEL.format(check=grade_id[len("check_") :]) + "### END HIDDEN TESTS"
                )
        nbformat.write(notebook, path)
    subprocess.run(
        [sys.executable, "-m", "nbgrader", "generate_assignment", "layernorm", "--log-level=ERROR"],
        cwd=folder,
        env=env,
        check=True,
        capture_output=True,
    )
    samples = sorted(
        p.name for p in SAMPLES.iterdir() if (p / "layernorm" / "layernorm.ipynb").is_file() and p.name not in STOCK_MISGRADES
    )
    for index, student in enumerate(students):
        (folder / "submitted" / student / "layernorm").mkdir(parents=True)
        shutil.copy(
            SAMPLES / samples[index % len(samples)] / "layernorm" / "layernorm.ipynb",
            folder / "submitted" / student / "layernorm",
        )
        if flavour == "stock":  # a kernel runs the whole folder as the student had it: the test cells' helper
            for helper in ("visible_tests.py", "lesson_text.txt"):
                shutil.copy(ROOT / "student_template" / helper, folder / "submitted" / student / "layernorm")


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

    run = subprocess.run(
        command + ["--student", student, "--log-level=ERROR"], cwd=course, env=env, capture_output=True, text=True
    )
    path = course / "autograded" / student / "layernorm" / "layernorm.ipynb"
    cells = (
        [c for c in nbformat.read(path, 4).cells if c.metadata.get("nbgrader", {}).get("grade_id", "").startswith("check_")]
        if path.is_file()
        else []
    )
    if not cells or any(not c.outputs or any(o.output_type == "error" for o in c.outputs) for c in cells):
        print(run.stdout[-2000:] + run.stderr[-2000:])
        return None
    printed = [o.get("text", "") for c in cells for o in c.outputs if o.output_type == "stream"]
    if not printed:
        return None
    return f"{len(cells)} hidden cells ran the checks in the kernel; first said: {printed[-1].strip()[:70]!r}"


def gradebook_totals(course: Path, students: list[str]) -> dict:
    return {s: total for s, (total, _) in stock_scores(course, students).items()}


def against_plain(scratch: Path, students: list[str], args, env: dict) -> int:
    """The cost of the sandbox and of the course, side by side: in each of `args.rounds` rounds, the plain process,
    grade-class on a copy of the submissions outside the course (as the plain process reads them), and grade-class
    recording into a fresh copy of the course (gradebook, autograded notebooks, nbgrader's feedback pages); the
    medians of each, and their ratios."""
    pristine = scratch / "kit"
    make_course(pristine, students, "kit", env)
    loose = scratch / "loose"
    shutil.copytree(pristine / "submitted", loose)

    def grade_class(folder: Path, out: Path) -> list[str]:
        command = [sys.executable, "-m", "autograder", "grade-class", str(folder), "--out", str(out)]
        command += ["--seed", str(args.seed), "--force"]
        return command + (["--workers", str(args.workers)] if args.workers else [])

    runs: dict[str, list[dict]] = {"plain": [], "outside": [], "course": []}
    for round_ in range(args.rounds):
        runs["plain"].append(
            run_tool([sys.executable, "-c", PLAIN, str(args.seed), str(loose), str(scratch / f"plain-out{round_}")], ROOT, env)
        )
        runs["outside"].append(run_tool(grade_class(loose, scratch / f"outside-out{round_}"), ROOT, env))
        course = scratch / f"course{round_}"
        shutil.copytree(pristine, course)
        runs["course"].append(run_tool(grade_class(course / "submitted", scratch / f"course-out{round_}"), ROOT, env))
        print(f"round {round_ + 1}: " + ", ".join(f"{name} {r[-1]['wall']:.1f} s" for name, r in runs.items()), flush=True)
    failed = [r for kind in runs.values() for r in kind if r["code"]]
    if failed:
        print(failed[0]["log"][-3000:])
        return 1
    wall = {name: statistics.median(r["wall"] for r in kind) for name, kind in runs.items()}
    print(
        f"{len(students)} students, medians of {args.rounds} rounds: plain process {wall['plain']:.1f} s; grade-class "
        f"{wall['outside']:.1f} s; grade-class --course {wall['course']:.1f} s"
    )
    for name, value, target in (
        ("grade-class / plain process", wall["outside"] / wall["plain"], PLAIN_TARGET),
        ("grade-class --course / grade-class", wall["course"] / wall["outside"], COURSE_TARGET),
        ("grade-class --course / plain process", wall["course"] / wall["plain"], COURSE_TARGET),
    ):
        print(f"ratio {name}: {value:.2f}x {'OK' if value <= target else 'MISSED'} (target <= {target}x)")
    peaks = [r["peak"] for kind in ("outside", "course") for r in runs[kind]]
    print(
        f"peak memory, MB: per worker {max(p['worker'] for p in peaks):.0f}; grade-class process "
        f"{max(p['root'] for p in peaks):.0f}"
    )
    scores = {}
    for kind, out in (("outside", "outside-out0"), ("course", "course-out0")):
        with open(scratch / out / "grades.csv") as handle:
            scores[kind] = {row["student"]: float(row["score"]) for row in csv.DictReader(handle)}
    scores["plain"] = {s: v["score"] for s, v in json.loads(runs["plain"][0]["log"].strip().splitlines()[-1]).items()}
    differ = [s for s in students if len({scores[kind].get(s) for kind in scores}) != 1]
    same = f"scores: {len(students) - len(differ)}/{len(students)} the same in all three"
    print(same + (f"; differ: {differ}" if differ else ""))
    return 1 if differ else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=50)
    parser.add_argument("--workers", type=int, default=None, help="grade-class workers (default: its own default)")
    parser.add_argument("--seed", type=int, default=4242)
    parser.add_argument("--once", action="store_true", help="run grade-class once (default: before and after stock)")
    parser.add_argument("--rounds", type=int, default=3, help="--against-plain: rounds of the three, alternating")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    parser.add_argument(
        "--against-plain",
        action="store_true",
        help="only grade-class against the plain process (before and after it), without the nbgrader runs",
    )
    args = parser.parse_args(argv)
    students, scratch = [f"s{i:03d}" for i in range(args.students)], Path(tempfile.mkdtemp(prefix="bench-class-"))
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "JUPYTER_PATH": str(scratch / "kernel" / "share" / "jupyter"),
        "AUTOGRADER_SEED": str(args.seed),
    }
    if args.against_plain:
        try:
            return against_plain(scratch, students, args, env)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    try:
        subprocess.run(
            [sys.executable, "-m", "ipykernel", "install", "--prefix", str(scratch / "kernel"), "--name", "bench-venv-python"],
            check=True,
            capture_output=True,
        )
        kit_course, nbkit_course, stock_course = scratch / "kit", scratch / "nbgrader-kit", scratch / "stock"
        make_course(kit_course, students, "kit", env)
        make_course(nbkit_course, students, "kit", env)
        make_course(stock_course, students, "stock", env)
        print(f"scratch: {scratch}; {len(students)} students; seed {args.seed}; kernel python: {sys.executable}")
        nbgrader = [sys.executable, "-m", "nbgrader", "autograde", "layernorm", "--force"]
        checked = kernel_check(stock_course, students[0], nbgrader, env)
        print(f"stock kernel check on {students[0]}: {checked or 'FAILED'}", flush=True)
        if checked is None:
            return 2

        grade_class = [
            sys.executable,
            "-m",
            "autograder",
            "grade-class",
            str(kit_course / "submitted"),
            "--out",
            str(scratch / "grade-class-out"),
            "--seed",
            str(args.seed),
            "--force",
        ]
        grade_class += ["--workers", str(args.workers)] if args.workers else []
        kit_runs = [run_tool(grade_class, ROOT, env)]
        print(f"grade-class: {kit_runs[0]['wall']:.1f} s, exit {kit_runs[0]['code']}", flush=True)
        plain = run_tool(
            [sys.executable, "-c", PLAIN, str(args.seed), str(kit_course / "submitted"), str(scratch / "plain-out")], ROOT, env
        )
        print(f"plain process: {plain['wall']:.1f} s, exit {plain['code']}", flush=True)
        feedback = [sys.executable, "-m", "nbgrader", "generate_feedback", "layernorm", "--force"]
        nbkit = with_feedback(run_tool(nbgrader, nbkit_course, env), run_tool(feedback, nbkit_course, env))
        print(
            f"nbgrader autograde and generate_feedback with the kit's configuration: {nbkit['wall']:.1f} s "
            f"({nbkit['feedback_wall']:.1f} s of it feedback), exit {nbkit['code']}",
            flush=True,
        )
        started, seen = time.perf_counter(), []

        def progress(line: str) -> None:
            if found := re.search(r"Autograding .*autograded/([^/]+)/", line):
                seen.append(found.group(1))
                if len(seen) % 10 == 1:
                    print(
                        f"  stock nbgrader: {len(seen)}/{len(students)} starts at {time.perf_counter() - started:.0f} s",
                        flush=True,
                    )

        stock = run_tool(nbgrader + ["--log-level=INFO"], stock_course, env, progress)
        failed = sorted(set(re.findall(r"error processing assignment '[^']*' for student '([^']+)'", stock["log"])))
        stock = with_feedback(stock, run_tool(feedback, stock_course, env))
        print(
            f"stock nbgrader, autograde and generate_feedback: {stock['wall']:.1f} s ({stock['feedback_wall']:.1f} s "
            f"of it feedback), exit {stock['code']}" + (f"; it failed {failed}" if failed else ""),
            flush=True,
        )
        if not args.once:  # grade-class on both sides of the long stock run: the machine's load varies
            kit_runs.append(run_tool(grade_class, ROOT, env))
            print(f"grade-class again: {kit_runs[-1]['wall']:.1f} s, exit {kit_runs[-1]['code']}", flush=True)
        if any(r["code"] for r in kit_runs + [plain]):
            print(next(r["log"][-3000:] for r in kit_runs + [plain] if r["code"]))
            return 1

        n, kit_wall = len(students), statistics.mean(r["wall"] for r in kit_runs)
        kit = {k: max(r["peak"][k] for r in kit_runs) for k in kit_runs[0]["peak"]}
        runs = ", ".join(f"{r['wall']:.1f}" for r in kit_runs)
        print(
            f"\nwall time for {n} students: grade-class {kit_wall:.1f} s (runs: {runs}); stock nbgrader "
            f"{stock['wall']:.1f} s; nbgrader with the kit {nbkit['wall']:.1f} s; plain process {plain['wall']:.1f} s"
        )
        ratios = {
            "stock / grade-class": (stock["wall"] / kit_wall, ">=", 30),
            "nbgrader with the kit / grade-class": (nbkit["wall"] / kit_wall, None, None),
            # grade-class here also records into the course, which the plain process does not: the sandbox's
            # cost alone, against its target, is what --against-plain measures
            "grade-class recording into the course / plain process": (kit_wall / plain["wall"], None, None),
        }
        for name, (value, sense, target) in ratios.items():
            verdict = (
                ""
                if target is None
                else (" OK" if (value >= target if sense == ">=" else value <= target) else " MISSED")
                + f" (target {sense} {target}x)"
            )
            print(f"ratio {name}: {value:.1f}x{verdict}")
        print("peak memory, MB (forked copies count their private pages only):")
        print(
            f"  grade-class:    tree {kit['tree']:.0f}; per worker {kit['worker']:.0f} (server VmHWM {kit['hwm']:.0f})"
            f"  {'OK' if kit['worker'] <= 600 else 'MISSED'} (target <= 600 per worker)"
        )
        print(f"  stock nbgrader: tree {stock['peak']['tree']:.0f}; per kernel {stock['peak']['kernel']:.0f}")
        print(f"  (the memory sampler used {sum(r['sampler_cpu'] for r in kit_runs + [stock, nbkit, plain]):.1f} s CPU in all)")

        with open(scratch / "grade-class-out" / "grades.csv") as handle:
            totals = {"grade-class": {row["student"]: float(row["score"]) for row in csv.DictReader(handle)}}
        totals["plain"] = {s: v["score"] for s, v in json.loads(plain["log"].strip().splitlines()[-1]).items()}
        totals["nbgrader with the kit"] = gradebook_totals(nbkit_course, students)
        totals["stock"] = gradebook_totals(stock_course, students)
        differ = [s for s in students if len({totals[k].get(s) for k in totals}) != 1]
        for s in differ:
            print(
                f"  DIFFERENT {s}: "
                + ", ".join(f"{k} {totals[k].get(s)}" for k in totals)
                + (" [stock failed it]" if s in failed else "")
            )
        print(
            f"scores: {n - len(differ)}/{n} students have the same total in all four" + (f"; differ: {differ}" if differ else "")
        )
        return 1 if differ else 0
    finally:
        if args.keep:
            print(f"kept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
