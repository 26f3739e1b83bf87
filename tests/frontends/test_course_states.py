"""One truth through any sequence of instructor actions: a Hypothesis state machine over a small course whose rules
are what an instructor does, in any order (collect a new or late submission, nbgrader autograde, grade-class
--course, a check's points overridden in formgrader, a written answer graded there with or without a comment, a
points change with or without generate_assignment --force, a regrade, generate and release feedback, export, the
class report, grading with or without isolation). After every step every view (the feedback pages, formgrader's,
the export, grade-class's files, the class report, Canvas's and Moodle's files) equals the standing the model
expects (it adds up what was done, never reading the gradebook), or the view refused with its one line: nothing
out of date is handed out; and every score, comment and needs-grading flag an instructor gave is as they left it.

Most steps run in-process with the stand-in grader (`course_states.StandIn`); the sequences of the issue that
found the disagreements are replayed at the end with the kit's real sandbox."""

import html
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
from course_states import CANVAS_ROSTER, KINDS, STUDENTS, Course, Model, Refused, StandIn, page_numbers, read_csv
from lateness import duration_range, says_late, says_late_by

CHECKS = [f"check_{name}" for name in RUBRIC]
WAITS = [34, 700, 18720, 267840]  # seconds a late submission comes after the last: 34 s, 12 min, 5.2 h, 3.1 days
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
        self.stamp, self.past_due, self.clock = 0, False, 0.0
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
        rule=st.sampled_from(["none", "zero"]),
        waits=st.lists(st.sampled_from(WAITS), min_size=len(STUDENTS), max_size=len(STUDENTS)),
    )
    def a_graded_class(self, kinds, late, nbgrader, rule="zero", waits=(34,) * len(STUDENTS)):
        """Every example starts where a course is after its first grading: each student submitted once, under the
        course's late rule ("none": nbgrader's default, flagged and nothing lost; "zero")."""
        self.course.set_late_rule(rule)
        self.model.rule = rule
        for student, kind, is_late, wait in sorted(zip(STUDENTS, kinds, late, waits), key=lambda s: s[2]):  # on time first
            self.collect(student, kind, is_late, wait)
        self.autograde(False) if nbgrader else self.grade_class(False)

    @rule(student=st.sampled_from(STUDENTS), kind=st.sampled_from(sorted(KINDS)), late=st.booleans(), wait=st.sampled_from(WAITS))
    def collect(self, student, kind, late, wait=34):
        """`late`: the clock has passed the due date (and stays past it: a later submission is later still), by
        `wait` seconds more."""
        self.stamp += 1
        self.past_due = self.past_due or late
        self.clock += wait if self.past_due else 0
        self.course.collect(student, kind, self.past_due, self.stamp, self.clock)
        self.model.submitted[student] = (kind, self.past_due, self.stamp)
        self.model.delay[student] = self.clock if self.past_due else 0.0

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
                self.model.grade(student, by_nbgrader=True)

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
    @rule(data=st.data(), cell=st.sampled_from(CHECKS), points=st.sampled_from([0, 1, 1.5, 2]))
    def set_a_score(self, data, cell, points):
        """An instructor overrides a check's points in formgrader."""
        self.score(data.draw(st.sampled_from(sorted(self.model.graded))), cell, points)

    @precondition(lambda self: self.model.graded)
    @rule(
        data=st.data(),
        cell=st.sampled_from(sorted(WRITTEN)),
        points=st.sampled_from([0, 0.5, 1, 2]),
        comment=st.sampled_from([None, "", "Well argued.", "Say <why> & how"]),
    )
    def grade_a_written_answer(self, data, cell, points, comment):
        """An instructor grades a written answer in formgrader: a score typed into its box, and maybe a comment
        (None: nothing typed in the comment box)."""
        student = data.draw(st.sampled_from(sorted(self.model.graded)))
        self.score(student, cell, points)
        if comment is not None:
            self.course.set_comment(student, cell, comment)
            self.model.comments[(student, cell)] = comment

    def score(self, student, cell, points):
        self.course.set_score(student, cell, points)
        self.model.instructor_scores(student, cell, points)

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
    def the_standing_is_the_models_and_the_lms_files_render_it(self):
        """The standing of every student is what the model says, and the LMS files rendered from it (one reading of
        the gradebook for both: a view of its own would cost a reading of every notebook after every step)."""
        standings, files = self.course.standings_and_lms_files()
        assert sorted(standings) == sorted(self.model.graded)
        for student, standing in standings.items():
            want = self.model.expected(student)
            assert close(standing.score, want["score"]) and close(standing.max_score, want["max"]), (student, want)
            assert close(standing.late_penalty, want["late"]) and bool(standing.stale) == want["stale"], student
            assert {n: c.points for n, c in standing.checks.items()} == pytest.approx(want["checks"], abs=CLOSE)
            assert all(close(c.points, want["written"][c.grade_id]) for c in standing.written)
            assert standing.unisolated == want["unisolated"]
            assert abs((standing.seconds_late or 0) - want["seconds_late"]) < 0.01, (student, standing.seconds_late, want)
        if self.model.graded:
            self.check_lms_files(files)

    @invariant()
    def what_the_instructor_gave_is_as_they_left_it(self):
        """Every score, comment and needs-grading flag is the instructor's, whatever the kit's commands did since
        (only nbgrader's own autograde asks for a review of a scored cell, as stock nbgrader does)."""
        marks = self.course.marks()
        for student in self.model.graded:
            for grade_id in CHECKS + list(WRITTEN):
                score, flag, comment = marks[(student, grade_id)]
                assert close(score, self.model.scores.get((student, grade_id))), (student, grade_id, score)
                assert flag == self.model.needs_manual_grade(student, grade_id), (student, grade_id, flag)
        for (student, cell), (_, _, comment) in marks.items():
            assert comment == self.model.comments.get((student, cell)), (student, cell, comment)

    @invariant()
    def formgrader_shows_the_standing(self):
        for student in self.model.graded:
            want, view = self.model.expected(student), self.course.formgrader_view(student)
            score, maximum = re.search(r"The grade: Score: ([\d.]+) / ([\d.]+)", view).groups()
            assert close(score, want["score"]) and close(maximum, want["max"]), (view, want)
            assert ("Out of date" in view) == want["stale"] and (UNISOLATED_LINE in view) == want["unisolated"]
            assert self.tells_lateness(view, student), view

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

    def check_lms_files(self, files):
        """Canvas's file keeps every row and column of its export and fills the assignment's column with each
        student's score, a grade out of date held back (the cell left as Canvas had it); Moodle's has a row per
        student it can fill (missing work as 0), and none while written answers await grading."""
        stale = {s for s in self.model.graded if self.model.stale(s)}
        wants = {s: self.model.expected(s) for s in self.model.graded}
        written, rows = files["canvas"]
        assert len(rows) == len(CANVAS_ROSTER) and rows[0] == CANVAS_ROSTER[0][:6] + ["layernorm"] + CANVAS_ROSTER[0][6:]
        column = {row[3]: row[6] for row in rows[2:]}
        assert float(rows[1][6]) == sum(self.model.source.values()) + sum(WRITTEN.values())
        for student in STUDENTS:
            if student in wants and student not in stale:
                assert close(column[student], wants[student]["score"]), (student, column[student], wants[student])
            else:
                assert column[student] == "", student  # as Canvas had it: held back
        assert column["dee"] == column[""] == "" and written.complete == (not stale) and bool(written.held_back) == bool(stale)
        waiting = sorted(s for s, w in wants.items() if w["awaiting"] and s not in stale)
        moodle = files["moodle"]
        if waiting:
            assert isinstance(moodle, Refused) and all(f'"{s}": ' in moodle.line for s in waiting), moodle
            return
        _, rows = moodle
        assert rows[0] == ["Email address", "layernorm"]
        expected = {f"{s}@example.org": w["score"] for s, w in wants.items() if s not in stale} | {"dee@example.org": 0}
        assert {email: float(score) for email, score in rows[1:]} == pytest.approx(expected, abs=CLOSE)

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
        for student, by, deducted in re.findall(r"<tr><td>(\w+)</td><td>([^<]+)</td><td>([^<]+)</td>", late):
            low, high = duration_range(by)
            assert low <= wants[student]["seconds_late"] <= high, (student, by, wants[student])
            assert deducted == "none" if not wants[student]["late"] else close(deducted, wants[student]["late"]), deducted

    def tells_lateness(self, text, student) -> bool:
        """`text` says that the submission was late, by a duration that covers the delay, and what it cost ("no
        points deducted" under nbgrader's default rule); or, on time, says nothing of lateness."""
        want = self.model.expected(student)
        if not want["seconds_late"]:
            return not says_late(text)
        deducted = re.search(r"([\d.]+) points deducted", text)
        cost = close(deducted.group(1), want["late"]) if deducted else ("no points deducted" in text and not want["late"])
        return says_late_by(text, want["seconds_late"]) and cost

    def late(self, student) -> bool:
        return self.model.graded[student].late

    # --- what the commands wrote ---------------------------------------------------------------------------
    def check_page(self, student, page):
        want, got = self.model.expected(student), page_numbers(page)
        assert close(got["score"], want["score"]) and close(got["max"], want["max"]), (student, got, want)
        assert close(got["late"], want["late"]) and got["unisolated"] == want["unisolated"]
        assert self.tells_lateness(got["late_line"], student) and ('id="late"' in page) == bool(want["seconds_late"]), page
        maxima = self.model.gradebook
        assert {n: parsed(p) for n, p in got["checks"].items()} == {
            n: shown(want["checks"][n], maxima[f"check_{n}"]) for n in RUBRIC
        }
        assert {c: parsed(p) for c, p in got["written"].items()} == {c: shown(p, WRITTEN[c]) for c, p in want["written"].items()}
        assert "No response" not in page  # nbgrader's automatic comment is nobody's word on the page
        for grade_id in WRITTEN:
            row = html.unescape(re.sub("</?bdi>", "", re.search(rf'data-cell="{grade_id}">(.*?)</tr>', page).group(1)))
            assert self.tells_the_comment(row, student, grade_id), row

    def tells_the_comment(self, text, student, grade_id) -> bool:
        """A view of a written answer says the instructor's comment where they wrote one, "no comment" where they
        graded it without one, and neither where they did not grade it."""
        comment = self.model.comments.get((student, grade_id))
        if comment:
            return f"Your instructor: {comment}" in text
        graded = (student, grade_id) in self.model.scores
        return ("no comment" in text.lower()) == graded and "Your instructor:" not in text

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
            assert self.tells_lateness(results["output"], student), results["output"]
            assert abs(results["extra_data"]["seconds_late"] - want["seconds_late"]) < 0.01
            assert abs(float(row["seconds_late"]) - want["seconds_late"]) < 0.01
            assert says_late_by(f"late by {row['late_by']}", want["seconds_late"]) if want["seconds_late"] else not row["late_by"]
            tests = {t["tags"][0]: t for t in results["tests"]}
            assert all(close(tests[n]["score"], want["checks"][n]) for n in RUBRIC)
            assert all(close(tests[g]["score"], want["written"][g] or 0) for g in WRITTEN)
            assert all(self.tells_the_comment(tests[g]["output"], student, g) for g in WRITTEN), results["tests"]
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
        machine.the_standing_is_the_models_and_the_lms_files_render_it,
        machine.what_the_instructor_gave_is_as_they_left_it,
        machine.formgrader_shows_the_standing,
        machine.the_export_is_the_standing_and_holds_back_what_is_out_of_date,
        machine.the_class_report_is_the_standing,
    ):
        check()


def replay(machine: Instructor, steps) -> None:
    for step in steps:
        step()
        every_view(machine)


@pytest.mark.slow
def test_an_instructors_grade_and_its_status_survive_the_kits_commands(tmp_path):
    """Found by the machine: a written answer graded in formgrader (and a check overridden) stays graded, with its
    comment and its "needs manual grading" cleared, through grade-class --course, forced or after a resubmission;
    nbgrader's own autograde asks for a review as stock nbgrader does, and the instructor's next grade clears it.
    Under nbgrader's default late rule (nothing lost), every view tells the two late students how late they were."""
    Instructor.place = tmp_path
    machine = Instructor()
    written = sorted(WRITTEN)[0]
    try:
        replay(
            machine,
            [
                lambda: machine.a_graded_class(["post_ln", "correct", "blank"], [False, True, True], True, "none", WAITS[1:]),
                lambda: machine.grade_a_written_answer(FixedDraw("ben"), written, 1, "Well argued."),
                lambda: machine.grade_a_written_answer(FixedDraw("cho"), written, 0, None),
                lambda: machine.set_a_score(FixedDraw("ada"), "check_forward_order", 2),
                lambda: machine.grade_class(True),
                lambda: machine.collect("ben", "blank", True),
                lambda: machine.grade_class(False),
                lambda: machine.feedback(True),
                lambda: machine.autograde(True),
                lambda: machine.grade_a_written_answer(FixedDraw("ben"), written, 2, ""),
                lambda: machine.grade_class(True),
            ],
        )
    finally:
        machine.teardown()
    assert machine.model.review == {("ada", "check_forward_order"), ("cho", written)}


class FixedDraw:
    """`st.data()` in a replayed step: the student named."""

    def __init__(self, value):
        self.value = value

    def draw(self, strategy):
        return self.value


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
