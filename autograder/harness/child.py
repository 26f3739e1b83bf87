"""Loading a submission's cells and running probes on it: the work of one sandboxed child.

`load_cells` is also how the trusted parent loads the kit and the reference, so every side turns notebook
cells into definitions the same way.
"""
from __future__ import annotations

import builtins
import linecache
import os
import sys

from .probes import Plan, Probing, describe_error, reset_torch_state, run_probe
from .protocol import encoded_answer, write_frame

GRADED_NAMES = ("TransformerBlock", "magnitude_by_formula", "magnitude_by_autograd", "classify_factor")


def load_cells(cells, namespace: dict | None = None) -> tuple[dict, list[dict]]:
    """Execute (label, code) cells in order, one namespace; a failing cell is recorded and skipped."""
    namespace = {"__name__": "__main__", "__builtins__": builtins} if namespace is None else namespace
    errors = []
    for label, code in cells:
        filename = f"<{label}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        try:
            exec(compile(code, filename, "exec"), namespace)
        except SyntaxError as error:
            errors.append({"cell": label, "type": "SyntaxError", "message": f"{error.msg} (line {error.lineno})",
                           "where": f"{label}, line {error.lineno}: {(error.text or '').strip()}"})
        except BaseException as error:  # SystemExit, KeyboardInterrupt: the cell ends, loading goes on
            errors.append({"cell": label, **describe_error(error)})
        reset_torch_state()
    return namespace, errors


class Reporter:
    """Writes the child's frames. A copy of the child made by the student's `os.fork()` that comes back into
    the harness ends there: only the child itself reports, so copies never garble or repeat its frames."""

    def __init__(self, fd: int):
        self.fd, self.pid = fd, os.getpid()

    def __call__(self, event: dict) -> None:
        if os.getpid() != self.pid:
            os._exit(0)
        write_frame(self.fd, event)


def run_job(kit: dict, job: dict, report_fd: int) -> None:
    """Load the cells, then run each probe, writing every step to `report_fd` as it happens.

    `job["skipped"]` lists [index, error] of cells an earlier child could not get through (it crashed or ran
    out of time in them): they are not run again, and count as cells that raised `error`.
    """
    report = Reporter(report_fd)
    report({"event": "loading"})
    skipped = {index: error for index, error in job.get("skipped", [])}
    namespace, errors = load_cells([])
    for index, (label, code) in enumerate(job["cells"]):
        if index in skipped:
            errors.append({"cell": label, **skipped[index]})
            continue
        report({"event": "cell", "index": index})
        errors += load_cells([(label, code)], namespace)[1]
    report({"event": "loaded", "cell_errors": errors[:20],
            "defined": [name for name in GRADED_NAMES if name in namespace]})
    probing = Probing(namespace, kit, Plan.from_dict(job["plan"]), [code for _, code in job["cells"]])
    for name in job["probes"]:
        report({"event": "start", "probe": name})
        observation = run_probe(name, probing)
        report({"event": "result", "probe": name, "observation": encoded_answer(observation)})
    report({"event": "done"})


def start_child(setup, uid: int | None, job: dict, workdir: str | None, report_w: int, out_w: int, group) -> None:
    """In a freshly forked child of a job's supervisor: the channel on fd 3, output on 1 and 2, nothing else
    open; CUDA when the plan asks for it; confinement; then the job. Never returns."""
    from .confine import confine, start_cuda
    from .supervisor import CONFINE_FAILED, CUDA_FAILED

    try:
        os.dup2(report_w, 200)
        os.dup2(out_w, 201)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(201, 1)
        os.dup2(201, 2)
        os.dup2(200, 3)
        os.closerange(4, 1 << 16)
        if (job.get("plan") or {}).get("device") == "cuda":
            try:
                start_cuda(setup.limits)
            except BaseException:
                os._exit(CUDA_FAILED)
        try:
            if group is not None:
                group.join()
            confine(workdir, setup, uid)
        except BaseException:
            os._exit(CONFINE_FAILED)
        run_job(setup.kit, job, 3)
        sys.stdout.flush()
        os._exit(0)
    except BaseException:
        os._exit(70)
