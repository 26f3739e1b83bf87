"""Gradescope's results.json: the one format every front end writes (see Gradescope's autograder
specification: top-level score, execution_time, output, visibility, tests[]).

Every number in it is the student's standing (`standing.Standing`): the top-level `score` (after any late
penalty), the `output` line, each check's test (an instructor's override included) and one test per written
answer (graded, or awaiting the instructor). The grader's own findings (each part passed or not, the details)
stay beside them in `extra_data`, and the standing itself too, so that a results folder's report reads back
what was written. The command line prints the same `output`.

A late submission says so in `output` ("late by 5.2 h, no points deducted") whatever the course's late rule, and
`extra_data` says how late (`late_by` as a person says it, `seconds_late`) and what it cost (`late_penalty`).
Outside a course the kit knows no due date: `seconds_late` is null (Gradescope applies its own late policy).

What Gradescope shows (`output`, each test's `name` and `output`) is text only: declared so (`output_format`,
`test_output_format` and `test_name_format` "text": Gradescope renders no Markdown, HTML or ANSI colour of it) and
written so, each line a student's text can reach rendered by `shown.line` (escape sequences, controls, direction
overrides and invisible characters as escapes, a line break of theirs as `\\n`), so that nothing a student wrote
starts a line of its own or changes what the lines around it say. `extra_data` keeps the values as they were."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path

from autograder.engine.results import CheckResult, Diverged, SubmissionResult, SubTest
from autograder.frontends.files import write_atomically
from autograder.frontends.shown import line
from autograder.frontends.standing import AWAITING, Standing, standing_of


def summary(result: SubmissionResult, standing: Standing | None = None) -> str:
    """What a student reads first: the standing's score line, then where the block went wrong and the notes."""
    standing = standing or standing_of(result)
    lines = [standing.summary()]
    if result.first_divergence:
        lines.append("Where your block first went wrong: " + line(result.first_divergence))
    lines += [f"Note: {line(note)}" for note in result.notes]
    return "\n".join(lines)


def written_output(cell) -> str:
    """What a written answer's test says: awaiting, the instructor's own comment (never nbgrader's automatic one),
    or, where nobody graded it and it still has points, nbgrader's zero for an answer left as released."""
    if cell.points is None:
        return AWAITING
    if cell.comment:
        return f"Your instructor: {line(cell.comment)}"
    if cell.manual:
        return "Graded by your instructor (no comment)."
    return "Not answered: an answer left as released scores 0."


def _written_test(number: int, cell) -> dict:
    test = {
        "name": line(cell.title),
        "number": str(number),
        "score": cell.points or 0.0,
        "max_score": cell.max_points,
        "output": written_output(cell),
        "tags": [cell.grade_id],
        "visibility": "visible",
        "extra_data": {"written": cell.grade_id, "awaiting": cell.points is None},
    }
    if cell.points is not None:
        test["status"] = "passed" if cell.points >= cell.max_points else "failed"
    return test


def results_json(result: SubmissionResult, standing: Standing | None = None) -> dict:
    """`standing`: the student's (the gradebook's, in a course); default the grader's own (`standing_of`)."""
    standing = standing or standing_of(result)
    tests = []
    for number, check in enumerate(result.checks, start=1):
        grade = standing.checks.get(check.check)
        tests.append(
            {
                "name": line(check.title),
                "number": str(number),
                "score": (grade.points or 0.0) if grade else check.points,
                "max_score": grade.max_points if grade else check.max_points,
                "status": "passed" if check.passed else "failed",
                "output": line(check.message),
                "tags": [check.check],
                "visibility": check.visibility,
                "extra_data": {
                    "check": check.check,
                    "parts": [
                        {"name": s.name, "score": s.points, "max_score": s.max_points, "passed": s.passed, "output": s.message}
                        for s in check.subtests
                    ],
                    "details": check.details,
                    "grader_error": check.grader_error,
                    "manual": bool(grade and grade.manual),
                },
            }
        )
    tests += [_written_test(len(tests) + number, cell) for number, cell in enumerate(standing.written, start=1)]
    return {
        "score": standing.score,
        "execution_time": result.execution_time,
        "output": summary(result, standing),
        "output_format": "text",
        "test_output_format": "text",
        "test_name_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
        "extra_data": {
            "submission": result.submission,
            "student": result.student,
            "seed": result.seed,
            "grader_errors": list(result.grader_errors),
            "device": result.device,
            "isolation": result.isolation,
            "first_divergence": result.first_divergence,
            "diverged": asdict(result.diverged) if result.diverged else None,
            "notes": list(result.notes),
            "max_score": standing.max_score,
            "late_by": standing.late_by,
            "seconds_late": standing.seconds_late,
            "late_penalty": standing.late_penalty,
            "profiles": result.profile,
            "facts": list(result.facts),
            "standing": standing.to_dict(),
        },
    }


def _finite(value):
    """Strict JSON has no NaN or Infinity (a diverging forward produces both): they become null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def write_results(
    result: SubmissionResult, path: str | Path, source: str | None = None, standing: Standing | None = None
) -> dict:
    """results.json, with the numbers of `standing` (default: the grader's own); `source`: the digest of the source
    notebook graded against (`kit.Assignment.key`). Returns what was written."""
    data = results_json(result, standing)
    if source:
        data["extra_data"]["source"] = source
    write_atomically(path, json.dumps(_finite(data), indent=2, allow_nan=False, default=float))
    return data


def result_from_json(data: dict) -> SubmissionResult:
    """The SubmissionResult a results.json was written from (for the class's grades.csv and report)."""
    extra = data.get("extra_data") or {}
    checks = []
    for test in data.get("tests", []):
        more = test.get("extra_data") or {}
        if "written" in more:
            continue
        parts = tuple(
            SubTest(p["name"], p["score"] or 0.0, p["max_score"] or 0.0, bool(p["passed"]), p.get("output") or "")
            for p in more.get("parts", [])
        )
        checks.append(
            CheckResult(
                more.get("check") or test["tags"][0],
                test["name"],
                parts,
                test.get("output", ""),
                test.get("visibility", "visible"),
                more.get("details") or {},
                more.get("grader_error"),
            )
        )
    return SubmissionResult(
        extra.get("submission", ""),
        tuple(checks),
        extra.get("seed", 0),
        extra.get("device", ""),
        extra.get("isolation", ""),
        data.get("execution_time", 0.0),
        extra.get("first_divergence"),
        tuple(extra.get("notes") or ()),
        extra.get("profiles") or {},
        extra.get("student"),
        tuple(extra.get("grader_errors") or ()),
        tuple(extra.get("facts") or ()),
        Diverged.from_dict(extra["diverged"]) if extra.get("diverged") else None,
    )


def standing_from_json(data: dict, result: SubmissionResult) -> Standing:
    """The standing a results.json was written with (the grader's own where it holds none)."""
    kept = (data.get("extra_data") or {}).get("standing")
    return Standing.from_dict(kept) if kept else standing_of(result)
