"""Does the suite catch a broken grader? Five breakages, one of each kind the kit promises (a check's part, a
sandbox layer's rule, the standing, the intake, the feedback), each made in a copy of this checkout and run against
the tests that guard it. A breakage is caught when at least one of those tests fails; the script prints which.

    .venv/bin/python tests/mutation_check.py            # all five
    .venv/bin/python tests/mutation_check.py standing   # one

Not a test itself (the suite cannot break its own grader while it runs): `docs/development.md` says when to run it
and what it printed last. Each copy is the tracked files as they are in the working tree, with the one change made;
nothing in this checkout is touched.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = ROOT / ".venv" / "bin" / "python"


@dataclass(frozen=True)
class Breakage:
    name: str
    what: str  # the promise broken, in words
    path: str  # the file changed
    old: str  # text found exactly once in it
    new: str
    tests: tuple  # pytest arguments: the tests that must catch it


BREAKAGES = (
    Breakage(
        "part",
        "a check's part pays without the work: the shortcut path's part is always passed",
        "autograder/engine/checks/shortcuts.py",
        "outcomes[PATH] = _path(evidence, outcomes[ATT].passed and outcomes[FF].passed)",
        "outcomes[PATH] = PASS",
        # the catalog's wrong forwards are held to the checks they lose points in, and every forward of it that loses
        # this part loses the additions' too; test_ledger holds each part of the shortcuts on a clamped shortcut
        ("tests/engine/test_catalog.py", "tests/engine/test_ledger.py", "-k", "wrong_forward or wrong_elsewhere"),
    ),
    Breakage(
        "layer",
        "a layer's rule opened: the system-call allowlist lets a child take file locks (flock)",
        "autograder/sandbox/inside/allowlist.py",
        '        "fdatasync",\n',
        '        "fdatasync",\n        "flock",\n',
        ("tests/sandbox/test_seccomp.py",),
    ),
    Breakage(
        "standing",
        "the standing ignores the instructor: the autograder's points win over a manual score",
        "autograder/frontends/standing.py",
        "given = self.manual_score if self.manual_score is not None else self.auto_score",
        "given = self.auto_score if self.auto_score is not None else self.manual_score",
        ("tests/frontends/test_course_states.py", "tests/frontends/test_writers.py"),
    ),
    Breakage(
        "intake",
        "the intake keeps what a student forged: the kit's own notebook metadata is no longer taken off",
        "autograder/frontends/nbgrader/intake.py",
        "return Intake(_without_kit_metadata(notebook), reading.notes)",
        "return Intake(notebook, reading.notes)",
        ("tests/frontends/test_intake.py",),
    ),
    Breakage(
        "feedback",
        "the feedback page shows the grader's own points, not the gradebook's standing",
        "autograder/frontends/feedback.py",
        "standing=standing or standing_of(result),",
        "standing=standing_of(result),",
        ("tests/frontends/test_feedback.py",),
    ),
)


def _copy() -> Path:
    """The tracked files of the working tree (and the untracked ones git does not ignore), in a new folder."""
    folder = Path(tempfile.mkdtemp(prefix="kit-mutant-"))
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, folder / name)
    folder.chmod(0o755)
    return folder


def _failed(output: str) -> list[str]:
    return sorted(set(re.findall(r"^(?:FAILED|ERROR) (\S+)", output, re.MULTILINE)))


def check(breakage: Breakage) -> tuple[bool, list[str], float]:
    """(caught, the tests that failed, seconds)."""
    folder = _copy()
    try:
        target = folder / breakage.path
        text = target.read_text()
        assert text.count(breakage.old) == 1, f"{breakage.name}: the text to change is not found exactly once"
        target.write_text(text.replace(breakage.old, breakage.new))
        env = {**os.environ, "PYTHONPATH": str(folder)}
        started = time.monotonic()
        done = subprocess.run(
            [str(PYTHON), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", "-rfE", *breakage.tests],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
        )
        failed = _failed(done.stdout)
        return done.returncode != 0 and bool(failed), failed, time.monotonic() - started
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(names: list[str]) -> int:
    chosen = [b for b in BREAKAGES if not names or b.name in names]
    missed = 0
    for breakage in chosen:
        caught, failed, seconds = check(breakage)
        missed += not caught
        print(f"{breakage.name:9} {'caught' if caught else 'MISSED':7} {seconds:6.1f} s  {breakage.what}")
        for test in failed:
            print(f"{'':17}failed: {test}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
