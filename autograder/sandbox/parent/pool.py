"""The sandbox servers of one grading run, in one place: `grade`, `grade-class` and nbgrader's executor all make,
start, lend and close their servers (`autograder.sandbox.parent.client.SandboxServer`) through a `ServerPool`.

Making a pool makes its servers without starting anything: where nothing can isolate a submission (and `unsafe`
was not asked for) that is where the grader refuses, with `IsolationUnavailable`, before anything ran. Then, in
order:

* `spawn` (optional, as early as possible): each server's process starts and imports torch on its own while the
  caller goes on importing the grader;
* `launch`: the servers are told the assignment and the folders to hide, and warm up on their own (the caller
  computes the reference's answers meanwhile);
* `wait_until_ready`: every server has warmed up; each is lent to one worker at a time (`lend`);
* `close` (or leaving the `with` block): every server ends, with everything any submission started.

`start` is `launch` then `wait_until_ready`, for a caller with nothing to do meanwhile.
"""

from __future__ import annotations

import contextlib
import queue

from autograder.course import kit
from .client import SandboxServer
from .policy import Limits


class ServerPool:
    """`count` sandbox servers with the same limits, isolation layers and `unsafe`; `isolation` passes layer choices
    to each server (`bubblewrap`, `namespaces`, `landlock`: tests switch them off); `warm_up`: see `SandboxServer`."""

    def __init__(
        self,
        count: int = 1,
        *,
        limits: Limits = Limits(),
        unsafe: bool = False,
        isolation: dict | None = None,
        warm_up: bool = True,
    ):
        self.limits, self.unsafe, self.isolation, self.warm_up = limits, unsafe, dict(isolation or {}), warm_up
        self.servers: list[SandboxServer] = []
        self.idle: queue.Queue = queue.Queue()
        self.resize(count)

    def resize(self, count: int) -> None:
        """Keep `count` servers: those beyond it are closed, new ones (not started) are added."""
        extras, self.servers = self.servers[count:], self.servers[:count]
        for server in extras:
            server.close()
        self.servers += [
            SandboxServer(limits=self.limits, unsafe=self.unsafe, start=False, warm_up=self.warm_up, **self.isolation)
            for _ in range(count - len(self.servers))
        ]

    def spawn(self) -> ServerPool:
        """Start every server's process now (see `SandboxServer.spawn`: call from a long-lived thread)."""
        for server in self.servers:
            server.spawn()
        return self

    def launch(self, assignment: kit.Assignment = kit.KIT, private=()) -> None:
        """Tell every server (spawned now if it was not) what it grades and which folders, besides the kit's
        checkout and the assignment's course, submissions must not read; they then warm up on their own."""
        for server in self.servers:
            server.assignment, server.extra_private = assignment, tuple(private)
            server.launch()

    def wait_until_ready(self) -> None:
        for server in self.servers:
            server.wait_until_ready()
            self.idle.put(server)

    def start(self, assignment: kit.Assignment = kit.KIT, private=()) -> ServerPool:
        """Launch and wait until ready; on a failure every server is closed."""
        try:
            self.launch(assignment, private)
            self.wait_until_ready()
        except BaseException:
            self.close()
            raise
        return self

    @contextlib.contextmanager
    def lend(self):
        """A ready server for one submission at a time: waits for one to be free, and takes it back after."""
        server = self.idle.get()
        try:
            yield server
        finally:
            self.idle.put(server)

    def close(self) -> None:
        for server in self.servers:
            server.close()

    def __enter__(self) -> ServerPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
