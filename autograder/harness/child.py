"""Loading a submission's cells and running probes on it: the work of one sandboxed child.

`load_cells` is also how the trusted parent loads the kit and the reference, so every side turns notebook
cells into definitions the same way.
"""
from __future__ import annotations

import builtins
import linecache

from .probes import Plan, Probing, describe_error, reset_torch_state, run_probe
from .protocol import encode_observation, write_frame

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


def run_job(kit: dict, job: dict, report_fd: int) -> None:
    """Load the cells, then run each probe, writing every step to `report_fd` as it happens."""
    write_frame(report_fd, {"event": "loading"})
    namespace, errors = load_cells(job["cells"])
    write_frame(report_fd, {"event": "loaded", "cell_errors": errors[:20],
                            "defined": [name for name in GRADED_NAMES if name in namespace]})
    probing = Probing(namespace, kit, Plan(**job["plan"]))
    for name in job["probes"]:
        write_frame(report_fd, {"event": "start", "probe": name})
        observation = run_probe(name, probing)
        write_frame(report_fd, {"event": "result", "probe": name, "observation": encode_observation(observation)})
    write_frame(report_fd, {"event": "done"})
