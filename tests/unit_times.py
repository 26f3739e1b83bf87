"""What `make test` ends with: the run's wall time and its ten slowest units of work (a module, or a group of
modules: `conftest.unit`), each with the time its tests took (set-up, call and tear-down summed, on whichever
worker ran them). A unit's time is what the whole suite waits for when that unit runs last; `docs/development.md`
keeps these numbers from the last fresh-clone run, with the budget per wing. No test asserts a time.
`KIT_TEST_TIMES=FILE` also writes every test's own time (set-up, call and tear-down summed) to FILE, as JSON, for
finding where a unit's time goes."""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict

SHOWN = 10


class UnitTimes:
    def __init__(self, unit_of):
        self.unit_of = unit_of
        self.started = time.monotonic()
        self.seconds: dict[str, float] = defaultdict(float)
        self.tests: dict[str, set] = defaultdict(set)
        self.each: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report):
        unit = self.unit_of(report.nodeid)
        self.seconds[unit] += getattr(report, "duration", 0.0) or 0.0
        self.tests[unit].add(report.nodeid)
        self.each[report.nodeid] += getattr(report, "duration", 0.0) or 0.0

    def pytest_terminal_summary(self, terminalreporter):
        if not self.seconds:
            return
        wall = time.monotonic() - self.started
        summed = sum(self.seconds.values())
        write = terminalreporter.write_line
        terminalreporter.section(f"the {SHOWN} slowest units")
        for unit, seconds in sorted(self.seconds.items(), key=lambda pair: -pair[1])[:SHOWN]:
            write(f"{seconds:8.1f} s  {unit} ({len(self.tests[unit])} tests)")
        wings: dict[str, float] = defaultdict(float)
        for nodeid, seconds in self.each.items():
            wings[wing(nodeid)] += seconds
        write("by wing: " + ", ".join(f"{name} {seconds:.0f} s" for name, seconds in sorted(wings.items(), key=lambda p: -p[1])))
        write(f"wall time {wall / 60:.1f} min; test time summed over workers {summed / 60:.1f} min")
        if os.environ.get("KIT_TEST_TIMES"):
            with open(os.environ["KIT_TEST_TIMES"], "w") as out:
                json.dump(dict(sorted(self.each.items(), key=lambda pair: -pair[1])), out, indent=0)


def wing(nodeid: str) -> str:
    """The wing a test belongs to: its folder under tests/ (engine, sandbox, grading, frontends, course), or
    "layout" for the tests of the repository as a whole."""
    parts = nodeid.split("::", 1)[0].removeprefix("tests/").split("/")
    return parts[0] if len(parts) > 1 else "layout"


def register(config, unit_of) -> None:
    """Only in the process that reports (xdist's controller, or a run without workers)."""
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(UnitTimes(unit_of), "unit-times")
