"""Gradescope's results.json: the one format every front end writes (see Gradescope's autograder
specification: top-level score, execution_time, output, visibility, tests[])."""
from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

from autograder.engine.results import CheckResult, SubmissionResult, SubTest, score_text


def summary(result: SubmissionResult) -> str:
    lines = [f"Score: {score_text(result.score, result.max_score)}"]
    if result.first_divergence:
        lines.append("Where your block first went wrong: " + result.first_divergence)
    lines += [f"Note: {note}" for note in result.notes]
    return "\n".join(lines)


def results_json(result: SubmissionResult) -> dict:
    tests = []
    for number, check in enumerate(result.checks, start=1):
        tests.append({
            "name": check.title,
            "number": str(number),
            "score": check.points,
            "max_score": check.max_points,
            "status": "passed" if check.passed else "failed",
            "output": check.message,
            "tags": [check.check],
            "visibility": check.visibility,
            "extra_data": {"check": check.check,
                           "parts": [{"name": s.name, "score": s.points, "max_score": s.max_points,
                                      "passed": s.passed, "output": s.message} for s in check.subtests],
                           "details": check.details, "grader_error": check.grader_error},
        })
    return {
        "score": result.score,
        "execution_time": result.execution_time,
        "output": summary(result),
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
        "extra_data": {"submission": result.submission, "student": result.student, "seed": result.seed,
                       "grader_errors": list(result.grader_errors),
                       "device": result.device, "isolation": result.isolation,
                       "first_divergence": result.first_divergence, "notes": list(result.notes),
                       "max_score": result.max_score, "profiles": result.profile, "facts": list(result.facts)},
    }


def write_atomically(path: str | Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(temporary, 0o644)      # mkstemp makes it private; results are meant to be read by others
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def _finite(value):
    """Strict JSON has no NaN or Infinity (a diverging forward produces both): they become null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def write_results(result: SubmissionResult, path: str | Path, source: str | None = None) -> None:
    """results.json; `source`: the digest of the source notebook graded against (`kit.Assignment.key`)."""
    data = results_json(result)
    if source:
        data["extra_data"]["source"] = source
    write_atomically(path, json.dumps(_finite(data), indent=2, allow_nan=False, default=float))


def result_from_json(data: dict) -> SubmissionResult:
    """The SubmissionResult a results.json was written from (for the class's grades.csv and report)."""
    extra = data.get("extra_data") or {}
    checks = []
    for test in data.get("tests", []):
        more = test.get("extra_data") or {}
        parts = tuple(SubTest(p["name"], p["score"] or 0.0, p["max_score"] or 0.0, bool(p["passed"]), p.get("output") or "")
                      for p in more.get("parts", []))
        checks.append(CheckResult(more.get("check") or test["tags"][0], test["name"], parts, test.get("output", ""),
                                  test.get("visibility", "visible"), more.get("details") or {}, more.get("grader_error")))
    return SubmissionResult(extra.get("submission", ""), tuple(checks), extra.get("seed", 0), extra.get("device", ""),
                            extra.get("isolation", ""), data.get("execution_time", 0.0), extra.get("first_divergence"),
                            tuple(extra.get("notes") or ()), extra.get("profiles") or {}, extra.get("student"),
                            tuple(extra.get("grader_errors") or ()), tuple(extra.get("facts") or ()))
