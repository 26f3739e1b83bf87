"""nbgrader's commands on an ordinary assignment of a course, with the kit's configuration against stock nbgrader.

A course that holds the kit's assignment holds others too, and the kit's plugins promise to leave them as stock
nbgrader leaves them, and about as fast. Two course folders are made alike: the kit's source and an ordinary
assignment (tests/nbgrader_course.py's `hw2`: a solution, an autograded test with a hidden part, a written
answer), the same submissions (one of them late), each with its own exchange. One folder's nbgrader_config.py is
the kit's (assignments/nbgrader_config.py), the other's has only the exchange's two lines both share. Each round
runs, on the ordinary assignment, in each folder (which goes first alternates from round to round, so load on the
shared machine hits both alike):

    nbgrader generate_assignment hw2 --force
    nbgrader autograde hw2 --force            (each submission in a kernel, as stock nbgrader runs it)
    nbgrader generate_feedback hw2 --force
    nbgrader export
    nbgrader release_feedback hw2

The report gives each command's median wall time in both folders and their ratio (kit / stock), and the same
for the CPU time of the command and the kernels it started (less moved by other load on the machine). Target:
every wall-time ratio at most 1.2x.

Exit status 1 when the two folders disagree (a command failed in one of them, grades.csv differs byte for byte, or
a feedback page differs), never for a missed target.

    .venv/bin/python benchmarks/ordinary_assignment.py [--rounds N] [--students N]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from nbgrader_course import ORDINARY, do_ordinary_homework, make_course  # noqa: E402

TARGET = 1.2
COMMANDS = {
    "generate_assignment": ["generate_assignment", ORDINARY, "--force"],
    "autograde": ["autograde", ORDINARY, "--force"],
    "generate_feedback": ["generate_feedback", ORDINARY, "--force"],
    "export": ["export"],
    "release_feedback": ["release_feedback", ORDINARY],
}


def make(folder: Path, template: Path, kit: bool, students: int) -> Path:
    """A copy of the `template` course (the kit's configuration or none) with `students` submissions of the
    ordinary assignment."""
    course = folder / "course"
    shutil.copytree(template, course)
    exchange = folder / "exchange"
    exchange.mkdir(mode=0o777)
    exchange.chmod(0o777)
    shared = f'\nc.CourseDirectory.course_id = "bench"\nc.Exchange.root = {str(exchange)!r}\n'
    config = course / "nbgrader_config.py"
    config.write_text((config.read_text() if kit else "c = get_config()  # noqa: F821\n") + shared)
    run(course, ["generate_assignment", ORDINARY, "--force"])
    released = course / "release" / ORDINARY / f"{ORDINARY}.ipynb"
    for index in range(students):
        student = f"student{index}"
        folder = course / "submitted" / student / ORDINARY
        folder.mkdir(parents=True)
        nbformat.write(do_ordinary_homework(nbformat.read(released, as_version=4), index % 3 != 2), folder / f"{ORDINARY}.ipynb")
        late = index == 1
        (folder / "timestamp.txt").write_text("2030-01-02 10:00:00.000000 UTC" if late else "2029-12-30 10:00:00.000000 UTC")
        (folder / "submission_secret.txt").write_text(f"secret-{student}")  # as `nbgrader collect` leaves it
    run(course, ["db", "assignment", "add", ORDINARY, "--duedate=2030-01-01 12:00:00 UTC"])
    return course


def run(course: Path, arguments: list[str]) -> tuple[float, float]:
    """Run one nbgrader command in the course: (wall seconds, CPU seconds of it and its kernels)."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    before, started = _cpu(), time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "nbgrader", *arguments], cwd=course, capture_output=True, text=True, env=env)
    seconds, cpu = time.perf_counter() - started, _cpu() - before
    if done.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(arguments)} failed in {course}:\n{done.stdout}\n{done.stderr}")
    return seconds, cpu


def _cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)  # every finished child, its kernels included
    return used.ru_utime + used.ru_stime


def outputs(course: Path) -> dict[str, bytes]:
    """What the commands wrote that a reader sees: grades.csv and every feedback page."""
    found = {"grades.csv": (course / "grades.csv").read_bytes()}
    for page in sorted((course / "feedback").glob(f"*/{ORDINARY}/*.html")):
        found[str(page.relative_to(course))] = page.read_bytes()
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds of every command in both folders (default 5)")
    parser.add_argument("--students", type=int, default=3, help="submissions of the ordinary assignment (default 3)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-ordinary-") as scratch:
        template = make_course(Path(scratch) / "template")  # one source notebook, its cell ids, for both
        courses = {
            "stock": make(Path(scratch) / "stock", template, False, args.students),
            "kit": make(Path(scratch) / "kit", template, True, args.students),
        }
        times = {(name, command): [] for name in courses for command in COMMANDS}
        cpu = {(name, command): [] for name in courses for command in COMMANDS}
        try:
            for round_ in range(args.rounds):
                order = list(courses) if round_ % 2 == 0 else list(reversed(courses))
                for name in order:
                    for command, arguments in COMMANDS.items():
                        wall, used = run(courses[name], arguments)
                        times[(name, command)].append(wall)
                        cpu[(name, command)].append(used)
                print(
                    f"round {round_ + 1}/{args.rounds}: "
                    + ", ".join(f"{c} {times[('stock', c)][-1]:.2f}/{times[('kit', c)][-1]:.2f}s" for c in COMMANDS),
                    flush=True,
                )
        except RuntimeError as error:
            print(error)
            return 1
        stock, kit = outputs(courses["stock"]), outputs(courses["kit"])
        differ = sorted(name for name in stock.keys() | kit.keys() if stock.get(name) != kit.get(name))
        shutil.rmtree(scratch, ignore_errors=True)

    print(f"\nmedians on the ordinary assignment, {args.students} submissions, {args.rounds} rounds (s)")
    print(f"  {'command':22s} {'stock':>7s} {'kit':>7s} {'ratio':>7s}   CPU: {'stock':>6s} {'kit':>6s} {'ratio':>6s}")
    missed = []
    for command in COMMANDS:
        plain, with_kit = statistics.median(times[("stock", command)]), statistics.median(times[("kit", command)])
        plain_cpu, kit_cpu = statistics.median(cpu[("stock", command)]), statistics.median(cpu[("kit", command)])
        ratio = with_kit / plain
        if ratio > TARGET:
            missed.append(command)
        print(
            f"  {command:22s} {plain:7.2f} {with_kit:7.2f} {ratio:6.2f}x        {plain_cpu:6.2f} {kit_cpu:6.2f} "
            f"{kit_cpu / plain_cpu:5.2f}x"
        )
    print(f"target: every ratio at most {TARGET}x: " + (f"MISSED ({', '.join(missed)})" if missed else "met"))
    if differ:
        print("the two folders disagree: " + ", ".join(differ))
        return 1
    print("grades.csv and every feedback page: the same bytes with the kit's configuration as without it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
