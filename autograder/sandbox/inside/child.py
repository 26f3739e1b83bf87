"""One sandboxed child: its descriptors, CUDA when asked for, its confinement, then the job, which the questions'
module the server was started with runs (see `Setup.questions`), reporting through a `Reporter`.
"""

from __future__ import annotations

import os
import sys

from .protocol import encoded_answer, write_frame


class Reporter:
    """Writes the child's frames. A copy of the child made by the student's `os.fork()` that comes back into
    the sandbox's code ends there: only the child itself reports, so copies never garble or repeat its frames."""

    def __init__(self, fd: int):
        self.fd, self.pid = fd, os.getpid()

    def __call__(self, event: dict) -> None:
        if os.getpid() != self.pid:
            os._exit(0)
        if "observation" in event:
            event = {**event, "observation": encoded_answer(event["observation"])}
        write_frame(self.fd, event)


def start_child(setup, uid: int | None, job: dict, workdir: str | None, report_w: int, out_w: int, group) -> None:
    """In a freshly forked child of a job's supervisor: the channel on fd 3, output on 1 and 2, nothing else
    open; CUDA when the plan asks for it; confinement; then the job. Never returns."""
    from .confine import confine, enter, start_cuda
    from .supervisor import CONFINE_FAILED, CUDA_FAILED, say_why

    try:
        os.dup2(report_w, 200)
        os.dup2(out_w, 201)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(201, 1)
        os.dup2(201, 2)
        os.dup2(200, 3)
        os.closerange(4, 1 << 16)
        device = "cuda" if (job.get("plan") or {}).get("device") == "cuda" else "cpu"
        try:  # while this child is one thread (see confine.py)
            if group is not None:
                group.join()
            workdir = enter(workdir, setup, uid)
        except BaseException as error:
            say_why(error)
            os._exit(CONFINE_FAILED)
        if device == "cuda":
            try:
                start_cuda(setup.limits)
            except BaseException as error:
                say_why(error)
                os._exit(CUDA_FAILED)
        try:
            confine(workdir, setup, uid, device)
        except BaseException as error:
            say_why(error)
            os._exit(CONFINE_FAILED)
        setup.questions.run_job(setup.kit, job, Reporter(3))
        sys.stdout.flush()
        os._exit(0)
    except BaseException:
        os._exit(70)
