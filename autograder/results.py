"""Results as data: what each check found, for one submission. Scoring and feedback read only these."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class SubTest:
    name: str
    points: float
    max_points: float
    passed: bool
    message: str = ""            # student-facing; empty when passed


@dataclass(frozen=True)
class CheckResult:
    check: str                   # rubric key, e.g. "forward_order"
    title: str
    subtests: tuple[SubTest, ...]
    message: str                 # student-facing summary
    visibility: str = "visible"
    details: dict = field(default_factory=dict)   # for the instructor: numbers, raw errors
    grader_error: str | None = None               # the check itself crashed: the grader's failure, not the student's

    @property
    def points(self) -> float:
        return sum(s.points for s in self.subtests)

    @property
    def max_points(self) -> float:
        return sum(s.max_points for s in self.subtests)

    @property
    def passed(self) -> bool:
        return all(s.passed for s in self.subtests)


@dataclass(frozen=True)
class SubmissionResult:
    submission: str
    checks: tuple[CheckResult, ...]
    seed: int
    device: str
    isolation: str
    execution_time: float
    first_divergence: str | None = None      # "Step 4 of 10 (...): ..." or None
    notes: tuple[str, ...] = ()              # student-facing remarks (cells that failed to run, ...)
    profile: dict = field(default_factory=dict)   # gradient profiles for the feedback plot
    student: str | None = None
    grader_errors: tuple[str, ...] = ()      # failures of the grader itself, for the instructor

    @property
    def score(self) -> float:
        return round(sum(c.points for c in self.checks), 4)

    @property
    def max_score(self) -> float:
        return sum(c.max_points for c in self.checks)

    def to_dict(self) -> dict:
        return asdict(self)
