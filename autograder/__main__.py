"""`python -m autograder`: the command line (`frontends/cli.py`) as a process of its own.

Once a command has done its work, the process ends without the interpreter's teardown: with torch loaded, freeing
every module takes about a second on two cores, and nothing of it reaches the disk. What a normal exit does first
is still done here: threads that are not daemons are waited for, the `atexit` functions run (logging's flush,
temporary folders' removal), and the standard streams are flushed.
"""

import atexit
import os
import sys
import threading

from autograder.frontends.cli import main


def status_of(stop: SystemExit) -> int:
    """The exit status Python gives a SystemExit (its text, if any, on stderr)."""
    if stop.code is None or isinstance(stop.code, int):
        return stop.code or 0
    print(stop.code, file=sys.stderr)
    return 1


def leave(status: int) -> None:
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing more can be said there
            pass
    os._exit(status)


try:
    main()
except SystemExit as stop:
    leave(status_of(stop))
leave(0)
