"""Results as data: what each check found, for one submission. Scoring and feedback read only these.

Points are written the same way everywhere a person reads them (`points_text`, `score_text`): "17 / 30",
whole numbers without decimals, others with at most two.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .steps import step_text


def points_text(value: float | None) -> str:
    """17.0 -> "17", 2.5 -> "2.5", 1.6667 -> "1.67"."""
    if value is None:
        return "-"
    text = f"{float(value):.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def score_text(score: float, max_score: float) -> str:
    return f"{points_text(score)} / {points_text(max_score)}"


@dataclass(frozen=True)
class SubTest:
    name: str
    points: float
    max_points: float
    passed: bool
    message: str = ""  # student-facing; empty when passed


@dataclass(frozen=True)
class CheckResult:
    check: str  # rubric key, e.g. "forward_order"
    title: str
    subtests: tuple[SubTest, ...]
    message: str  # student-facing summary
    visibility: str = "visible"
    details: dict = field(default_factory=dict)  # for the instructor: numbers, raw errors
    grader_error: str | None = None  # the check itself crashed: the grader's failure, not the student's

    @property
    def points(self) -> float:
        return round(sum(s.points for s in self.subtests), 6)

    @property
    def max_points(self) -> float:
        return round(sum(s.max_points for s in self.subtests), 6)

    @property
    def passed(self) -> bool:
        return all(s.passed for s in self.subtests)


@dataclass(frozen=True)
class Diverged:
    """Where a forward first differs from Pre-LN, as data: the step (None: the values show where, not which step),
    the run it was seen in where the two runs differ, and whether the other run shows no divergence at all. Readers
    group and compare by these fields; `label` words them."""

    step: int | None
    mode: str | None = None
    only: bool = False

    @classmethod
    def from_dict(cls, data: dict) -> Diverged:
        """As kept in a result (`dataclasses.asdict`); a field an earlier version kept (the verified cause's kind)
        is read past."""
        return cls(data.get("step"), data.get("mode"), bool(data.get("only")))

    def where(self) -> str:
        """'In train mode only: ', 'In eval mode: ' where the two runs differ; '' where they agree."""
        return f"In {self.mode} mode{' only' if self.only else ''}: " if self.mode else ""

    def label(self) -> str | None:
        """'In train mode only: Step 4 of 10 (...)', 'Step 2 of 10 (...)'; None where no step is named."""
        return None if self.step is None else self.where() + step_text(self.step)


@dataclass(frozen=True)
class SubmissionResult:
    submission: str
    checks: tuple[CheckResult, ...]
    seed: int
    device: str
    isolation: str
    execution_time: float
    first_divergence: str | None = None  # "Step 4 of 10 (...): ..." or None
    notes: tuple[str, ...] = ()  # student-facing remarks (cells that failed to run, ...)
    profile: dict = field(default_factory=dict)  # gradient profiles for the feedback plot
    student: str | None = None
    grader_errors: tuple[str, ...] = ()  # failures of the grader itself, for the instructor
    facts: tuple[dict, ...] = ()  # what the feedback says the forward did, as data (`engine.facts`)
    diverged: Diverged | None = None  # the first divergent step as data; `first_divergence` says it in words

    @property
    def score(self) -> float:
        return round(sum(c.points for c in self.checks), 4)

    @property
    def max_score(self) -> float:
        return round(sum(c.max_points for c in self.checks), 6)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "SubmissionResult":
        """The inverse of `to_dict` (a result kept in an autograded notebook's metadata, say)."""
        checks = tuple(CheckResult(**{**c, "subtests": tuple(SubTest(**s) for s in c["subtests"])}) for c in data["checks"])
        return cls(
            **{
                **data,
                "checks": checks,
                "notes": tuple(data.get("notes") or ()),
                "grader_errors": tuple(data.get("grader_errors") or ()),
                "facts": tuple(data.get("facts") or ()),
                "diverged": Diverged.from_dict(data["diverged"]) if data.get("diverged") else None,
            }
        )
