"""One truth through any sequence of instructor actions: a Hypothesis state machine over a small course whose rules
are what an instructor does, in any order (collect a new or late submission, nbgrader autograde, grade-class
--course, a score typed in formgrader for a check or a written answer, a points change with or without
generate_assignment --force, a regrade, generate and release feedback, export, the class report, grading with
or without isolation). After every step every view equals the standing the model expects (it adds up what was
done, never reading the gradebook), or the view refused with its one line: nothing out of date is handed out.

Most steps run in-process with the stand-in grader (`course_states.StandIn`); the sequences of the issue that
found the disagreements are replayed at the end with the kit's real sandbox."""

import json
import os
import re
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from autograder.engine.rubric import RUBRIC, WRITTEN
from autograder.frontends.standing import UNISOLATED_LINE
from course_states import KINDS, STUDENTS, Course, Model, Refused, StandIn, page_numbers, read_csv

CHECKS = [f"check_{name}" for name in RUBRIC]
CLOSE = 0.006  # points are shown with at most two decimals


@pytest.fixture(autouse=True)
def alembic_on_path(monkeypatch):
    """nbgrader starts `alembic` by name to make a gradebook: this environment's, as on a hub's PATH."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")


def close(a, b) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and abs(float(a) - float(b)) <= CLOSE)


def shown(points, maximum) -> str:
    return "awaiting your instructor" if points is None else f"{float(points):.2f} / {float(maximum):.2f}"


def parsed(text: str) -> str:
    if text.startswith("awaiting"):
        return "awaiting your instructor"
    got, maximum = text.split(" / ")
    return f"{float(got):.2f} / {float(maximum):.2f}"


class Instructor(RuleBasedStateMachine):
    """The course (`course_states.Course`), the model and the checks of every view against it."""

    place: Path = None
    real = False

    def __init__(self):
        super().__init__()
        Instructor.examples = getattr(Instructor, "examples", 0) + 1
        self.course = Course(self.place / f"example{Instructor.examples}")
        self.model, self.grader = Model(), StandIn()
        self.stamp, self.past_due = 0, False
        self.context = None if self.real else self.grader.active()
        if self.context is not None:
            self.context.__enter__()

    def teardown(self):
        if self.context is not None:
            self.context.__exit__(None, None, None)

    # --- the instructor's actions --------------------------------------------------------------------------
    @initialize(
        kinds=st.lists(st.sampled_from(sorted(KINDS)), min_size=len(STUDENTS), max_size=len(STUDENTS)),
        late=st.lists(st.booleans(), min_size=len(STUDENTS), max_size=len(STUDENTS)),
        nbgrader=st.booleans(),
    )
    def a_graded_class(self, kinds, late, nbgrader):
        """Every example starts where a course is after its first grading: each student submitted once."""
        for student, kind, is_late in sorted(zip(STUDENTS, kinds, late), key=lambda s: s[2]):  # on time first
            self.collect(student, kind, is_late)
        self.autograde(False) if nbgrader else self.grade_class(False)

    @rule(student=st.sampled_from(STUDENTS), kind=st.sampled_from(sorted(KINDS)), late=st.booleans())
    def collect(self, student, kind, late):
        """`late`: the clock has passed the due date (and stays past it: a later submission is later still)."""
        self.stamp += 1
        self.past_due = self.past_due or late
        self.course.collect(student, kind, self.past_due, self.stamp)
        self.model.submitted[student] = (kind, self.past_due, self.stamp)

    @rule(force=st.booleans())
    def autograde(self, force):
        done = self.course.autograde(force)
        if self.model.out_of_date_gradebook():
            assert isinstance(done, Refused) and "generate_assignment layernorm --force" in done.line, done
            return
        assert not isinstance(done, Refused), done
        for student, (_, _, stamp) in self.model.submitted.items():
            graded = self.model.graded.get(student)
            if force or graded is None or stamp > graded.stamp:
                self.model.grade(student)

    @rule(force=st.booleans())
    def grade_class(self, force):
        model = self.model
        done = self.course.grade_class(force)
        if model.out_of_date_gradebook():
            assert isinstance(done, Refused) and "generate_assignment layernorm --force" in done.line, done
            return
        assert not isinstance(done, Refused), done
        for student, (_, _, stamp) in model.submitted.items():
            fresh = model.class_graded.get(student) == (model.source, stamp)
            if force or not fresh or student not in model.graded or model.stale(student):
                model.grade(student)
                model.class_graded[student] = (dict(model.source), stamp)
        self.check_grade_class_files(done)

    @precondition(lambda self: self.model.graded)
    @rule(data=st.data(), cell=st.sampled_from(CHECKS + list(WRITTEN)), points=st.sampled_from([0, 1, 1.5, 2]))
    def set_a_score(self, data, cell, points):
        self.score(data.draw(st.sampled_from(sorted(self.model.graded))), cell, points)

    def score(self, student, cell, points):
        self.course.set_score(student, cell, points)
        self.model.scores[(student, cell)] = points

    @rule(cell=st.sampled_from(CHECKS), points=st.sampled_from([0, 2, 6, 8]), generate=st.sampled_from([True, True, False]))
    def change_points(self, cell, points, generate):
        self.course.change_points({cell: points}, generate)
        self.model.source[cell] = points
        if generate:
            self.model.gradebook = dict(self.model.source)

    @rule(unsafe=st.booleans())
    def isolation(self, unsafe):
        self.grader.unsafe = self.model.unsafe = unsafe

    @precondition(lambda self: self.model.graded)
    @rule(release=st.booleans())
    def feedback(self, release):
        done = self.course.release_feedback() if release else self.course.generate_feedback()
        if self.any_stale():
            assert isinstance(done, Refused) and "out of date" in done.line, done
            return
        assert not isinstance(done, Refused), done
        pages = {}
        for student in self.model.graded:
            pages[student] = self.course.page(student).read_text()
            self.check_page(student, pages[student])
        if release:
            assert self.course.released() == sorted(pages.values())

    # --- every view, after every step ------------------------------------------------------------------------
    def any_stale(self) -> bool:
        return any(self.model.stale(s) for s in self.model.graded)

    @invariant()
    def the_standing_is_the_models(self):
        standings = self.course.standings()
        assert sorted(standings) == sorted(self.model.graded)
        for student, standing in standings.items():
            want = self.model.expected(student)
            assert close(standing.score, want["score"]) and close(standing.max_score, want["max"]), (student, want)
            assert close(standing.late_penalty, want["late"]) and bool(standing.stale) == want["stale"], student
            assert {n: c.points for n, c in standing.checks.items()} == pytest.approx(want["checks"], abs=CLOSE)
            assert all(close(c.points, want["written"][c.grade_id]) for c in standing.written)
            assert standing.unisolated == want["unisolated"]

    @invariant()
    def formgrader_shows_the_standing(self):
        for student in self.model.graded:
            want, view = self.model.expected(student), self.course.formgrader_view(student)
            score, maximum = re.search(r"The grade: Score: ([\d.]+) / ([\d.]+)", view).groups()
            assert close(score, want["score"]) and close(maximum, want["max"]), (view, want)
            assert ("Out of date" in view) == want["stale"] and (UNISOLATED_LINE in view) == want["unisolated"]

    @invariant()
    def the_export_is_the_standing_and_holds_back_what_is_out_of_date(self):
        if not self.model.graded:
            return
        done = self.course.export()
        stale = {s for s in self.model.graded if self.model.stale(s)}
        if stale:
            assert isinstance(done, Refused) and f"the grades of {len(stale)} student" in done.line, done
        else:
            assert not isinstance(done, Refused), done
        rows = {r["student_id"]: r for r in read_csv(self.course.exported) if r["assignment"] == "layernorm"}
        long = read_csv(self.course.exported.with_name("grades_per_check.csv"))
        assert set(rows) == set(self.model.graded) - stale and {r["student"] for r in long} == set(rows), stale
        for student in rows:
            want, row = self.model.expected(student), rows[student]
            assert close(row["score"], want["score"]) and close(row["max_score"], want["max"])
            assert close(row["raw_score"], want["raw"]) and close(row["late_submission_penalty"], want["late"])
            assert close(row["awaiting"], want["awaiting"]) and close(row["seconds_late"], want["seconds_late"])
            assert bool(row["late_by"]) == self.late(student), row  # said under every late rule
            mine = {r["check"]: r for r in long if r["student"] == student}
            assert all(close(mine[f"check_{n}"]["points"], want["checks"][n]) for n in RUBRIC)
            assert all(close(mine[grade_id]["points"] or None, points) for grade_id, points in want["written"].items())
            assert {r["late"] for r in mine.values()} == {str(int(self.late(student)))}

    @invariant()
    def the_class_report_is_the_standing(self):
        if not self.model.graded:
            return
        page = self.course.report()
        wants = {s: self.model.expected(s) for s in self.model.graded}
        mean = sum(w["score"] for w in wants.values()) / len(wants)
        summary = re.search(r"(\d+) students?; mean ([\d.]+)", page)
        assert int(summary.group(1)) == len(wants) and close(summary.group(2), mean), (summary.group(0), mean)
        checks = page.split('id="checks"')[1].split("</table>")[0]
        means = dict(re.findall(r"<tr><td>([^<]+)</td><td>\d+ of \d+</td><td>[^<]+</td><td>([\d.]+) of", checks))
        for name, spec in RUBRIC.items():
            expected = sum(w["checks"][name] for w in wants.values()) / len(wants)
            assert close(means[spec.title.replace("'", "&#x27;")], expected), (name, means, expected)
        assert ('id="stale"' in page) == any(w["stale"] for w in wants.values())
        assert ('id="unisolated"' in page) == any(w["unisolated"] for w in wants.values())
        late = page.split('id="late"')[1].split("</table>")[0] if 'id="late"' in page else ""
        assert {s for s in wants if f"<td>{s}</td>" in late} == {s for s in wants if self.late(s)}

    def late(self, student) -> bool:
        return self.model.graded[student].late

    # --- what the commands wrote ---------------------------------------------------------------------------
    def check_page(self, student, page):
        want, got = self.model.expected(student), page_numbers(page)
        assert close(got["score"], want["score"]) and close(got["max"], want["max"]), (student, got, want)
        assert close(got["late"], want["late"]) and got["unisolated"] == want["unisolated"]
        maxima = self.model.gradebook
        assert {n: parsed(p) for n, p in got["checks"].items()} == {
            n: shown(want["checks"][n], maxima[f"check_{n}"]) for n in RUBRIC
        }
        assert {c: parsed(p) for c, p in got["written"].items()} == {c: shown(p, WRITTEN[c]) for c, p in want["written"].items()}

    def check_grade_class_files(self, rows):
        out = self.course.out
        table = {r["student"]: r for r in read_csv(out / "grades.csv")}
        assert {r["student"] for r in rows} == set(table) == set(self.model.submitted)
        for student in self.model.submitted:
            want, row = self.model.expected(student), table[student]
            assert close(row["score"], want["score"]) and close(row["max_score"], want["max"])
            assert close(row["late_penalty"], want["late"]) and all(close(row[n], want["checks"][n]) for n in RUBRIC)
            assert not row["grader_errors"], row["grader_errors"]
            results = json.loads((out / student / "results.json").read_text())
            assert close(results["score"], want["score"]) and results["output"].startswith("Score: ")
            tests = {t["tags"][0]: t for t in results["tests"]}
            assert all(close(tests[n]["score"], want["checks"][n]) for n in RUBRIC)
            assert all(close(tests[g]["score"], want["written"][g] or 0) for g in WRITTEN)
            assert close(sum(t["max_score"] for t in tests.values()), want["max"])
            assert (out / student / "feedback.html").read_text() == self.course.page(student).read_text()
            self.check_page(student, self.course.page(student).read_text())


@pytest.mark.slow
def test_every_view_is_the_standing_through_any_sequence_of_instructor_actions(tmp_path):
    Instructor.place = tmp_path
    run = Instructor.TestCase
    phases = [p for p in Phase if p != Phase.explain and (p != Phase.shrink or os.environ.get("KIT_STATE_SHRINK", "1") == "1")]
    run.settings = settings(
        max_examples=int(os.environ.get("KIT_STATE_EXAMPLES", 12)),
        stateful_step_count=8,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        phases=phases,
    )
    run().runTest()


def every_view(machine: Instructor) -> None:
    for check in (
        machine.the_standing_is_the_models,
        machine.formgrader_shows_the_standing,
        machine.the_export_is_the_standing_and_holds_back_what_is_out_of_date,
        machine.the_class_report_is_the_standing,
    ):
        check()


@pytest.mark.slow
def test_the_sequences_that_disagreed_with_the_kits_real_grading(tmp_path):
    """The orders of the issue, graded by the real sandbox: an override in the report's means; a late student with
    the penalty "zero" in grade-class's results.json; a check's points raised, then feedback asked for before
    the regrade (refused, every page still as it was), then grade-class --course (no grader error)."""
    Instructor.place, Instructor.real = tmp_path, True
    try:
        machine = Instructor()
    finally:
        Instructor.real = False
    steps = [
        lambda: machine.collect("ada", "correct", False),
        lambda: machine.collect("ben", "blank", False),
        lambda: machine.collect("cho", "correct", True),
        lambda: machine.autograde(False),
        lambda: machine.score("ben", "check_forward_order", 2),
        lambda: machine.grade_class(False),
        lambda: machine.feedback(True),
        lambda: machine.change_points("check_forward_order", 6, True),
        lambda: machine.feedback(False),
        lambda: machine.feedback(True),
        lambda: machine.grade_class(False),
        lambda: machine.feedback(True),
    ]
    pages = {}
    for number, step in enumerate(steps):
        step()
        every_view(machine)
        if number == 6:
            pages = {s: machine.course.page(s).read_text() for s in STUDENTS}
        if number == 9:  # refused twice: the pages handed out are the ones before the points changed
            assert {s: machine.course.page(s).read_text() for s in STUDENTS} == pages
    assert machine.model.expected("cho")["score"] == 0 and machine.model.expected("ben")["checks"]["forward_order"] == 2
    assert machine.model.graded["ada"].points["check_forward_order"] == 6
    results = json.loads((machine.course.out / "ada" / "results.json").read_text())
    assert next(t for t in results["tests"] if t["tags"] == ["forward_order"])["score"] == 6
