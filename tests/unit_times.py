"""What `make test` ends with: the run's wall time and its ten slowest units of work (a module, or a group of
modules: `conftest.unit`), each with the time its tests took (set-up, call and tear-down summed, on whichever
worker ran them) and the CPU time they used. A unit's time is what the whole suite waits for when that unit runs
last; its CPU time is what it costs the machine, which a run on every core is bound by (docs/development.md).
`docs/development.md` keeps these numbers from the last fresh-clone run, with the budget per wing. No test asserts
a time.

The CPU time of a test is measured in the process that runs it (`CpuMeter`): its own, and that of every process it
started and waited for (a command, a server it closed, and theirs in turn), phase by phase. A server made for a
module is counted in the test whose tear-down closes it. A process that nobody waits for is not counted.

`KIT_TEST_TIMES=FILE` also writes every test's own time and CPU time (set-up, call and tear-down summed) to FILE,
as JSON (`{test: [seconds, cpu seconds]}`), for finding where a unit's time goes."""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict

import pytest

SHOWN = 10


def _cpu() -> float:
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


class CpuMeter:
    """In the process that runs the tests: the CPU time of each phase of a test, as a user property of its report
    (which xdist hands to the reporting process)."""

    def _phase(self, item, when: str):
        before = _cpu()
        yield
        item.user_properties.append((f"cpu_{when}", _cpu() - before))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(self, item):
        yield from self._phase(item, "setup")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        yield from self._phase(item, "call")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item):
        yield from self._phase(item, "teardown")


class UnitTimes:
    def __init__(self, unit_of):
        self.unit_of = unit_of
        self.started = time.monotonic()
        self.seconds: dict[str, float] = defaultdict(float)
        self.tests: dict[str, set] = defaultdict(set)
        self.each: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self.cpu_each: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report):
        unit = self.unit_of(report.nodeid)
        seconds = getattr(report, "duration", 0.0) or 0.0
        cpu = dict(getattr(report, "user_properties", ()) or ()).get(f"cpu_{report.when}", 0.0)
        self.seconds[unit] += seconds
        self.tests[unit].add(report.nodeid)
        self.each[report.nodeid] += seconds
        self.cpu[unit] += cpu
        self.cpu_each[report.nodeid] += cpu

    def pytest_terminal_summary(self, terminalreporter):
        if not self.seconds:
            return
        wall = time.monotonic() - self.started
        summed = sum(self.seconds.values())
        write = terminalreporter.write_line
        terminalreporter.section(f"the {SHOWN} slowest units")
        for unit, seconds in sorted(self.seconds.items(), key=lambda pair: -pair[1])[:SHOWN]:
            write(f"{seconds:8.1f} s {self.cpu[unit]:8.1f} s CPU  {unit} ({len(self.tests[unit])} tests)")
        wings: dict[str, list] = defaultdict(lambda: [0.0, 0.0])
        for nodeid, seconds in self.each.items():
            wings[wing(nodeid)][0] += seconds
            wings[wing(nodeid)][1] += self.cpu_each[nodeid]
        ranked = sorted(wings.items(), key=lambda pair: -pair[1][0])
        write("by wing: " + ", ".join(f"{name} {seconds:.0f} s ({cpu:.0f} s CPU)" for name, (seconds, cpu) in ranked))
        write(
            f"wall time {wall / 60:.1f} min; test time summed over workers {summed / 60:.1f} min; "
            f"CPU time {sum(self.cpu.values()) / 60:.1f} min"
        )
        if os.environ.get("KIT_TEST_TIMES"):
            each = {nodeid: [seconds, self.cpu_each[nodeid]] for nodeid, seconds in self.each.items()}
            with open(os.environ["KIT_TEST_TIMES"], "w") as out:
                json.dump(dict(sorted(each.items(), key=lambda pair: -pair[1][0])), out, indent=0)


def wing(nodeid: str) -> str:
    """The wing a test belongs to: its folder under tests/ (engine, sandbox, grading, frontends, course), or
    "layout" for the tests of the repository as a whole."""
    parts = nodeid.split("::", 1)[0].removeprefix("tests/").split("/")
    return parts[0] if len(parts) > 1 else "layout"


def register(config, unit_of) -> None:
    """The CPU meter in every process (one that runs no test never calls it); the report only in the process that
    reports (xdist's controller, or a run without workers)."""
    config.pluginmanager.register(CpuMeter(), "cpu-meter")
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(UnitTimes(unit_of), "unit-times")
