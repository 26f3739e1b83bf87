"""Every kind of state a sandboxed child can create or reach, and how each layer closes it: one table (the
isolation string every result carries is `isolation.describe`).

A row is a kind of kernel object (files, processes, IPC, key rings, cgroups...), a column a layer (see
`autograder.sandbox.parent.client`). Each cell says how the layer closes that kind, as a `Closed`:

* REFUSED: the child can neither make one nor reach another's;
* OWN: it may make one, but it is its own (its namespace, its root, its memory) and goes with it;
* REMOVED: it may make one where another job could reach it, and it is removed (killed, deleted) when its job
  ends, before the next job starts;
* OPEN: nothing closes it (only without isolation, or where the table says so).

The containment tests iterate this table in every layer, for two things: leave one behind, and find a
classmate's (`tests/catalog/kinds.py` holds one probe per row, and a test fails for a row without one). The
layer table of docs/security.md is generated from it (`autograder.sandbox.layer_page`), and a test compares the
two. A new kind is a row.
"""

from __future__ import annotations

from dataclasses import dataclass

REFUSED, OWN, REMOVED, OPEN = "refused", "own", "removed", "open"
LAYERS = {
    "bubblewrap": "bubblewrap (any user)",
    "namespaces": "namespaces (root, no bubblewrap)",
    "landlock": "permissions with Landlock (root, no namespaces: a container)",
    "permissions": "permissions without Landlock (refused unless `--unsafe`)",
    "unsafe": "neither root nor bubblewrap (`--unsafe`)",
}
OPT_IN = ("permissions", "unsafe")  # the columns a grader refuses unless the instructor opts in


@dataclass(frozen=True)
class Closed:
    how: str  # REFUSED, OWN, REMOVED or OPEN
    text: str  # what the layer table says (docs/security.md)
    seen: bool = True  # whether a child's own search finds what it made of this kind (Landlock hides its processes)


@dataclass(frozen=True)
class Kind:
    name: str
    title: str
    closed: dict  # layer (a key of LAYERS) -> Closed


def _row(name: str, title: str, *cells: tuple) -> Kind:
    """A row; a cell's text "same" is the text of the cell before it; a third item, False, says that the child's own
    search does not find what it made there (`Closed.seen`)."""
    assert len(cells) == len(LAYERS), name
    closed, before = {}, ""
    for layer, (how, text, *seen) in zip(LAYERS, cells):
        before = before if text == "same" else text
        closed[layer] = Closed(how, before, *seen)
    return Kind(name, title, closed)


SECCOMP = "refused (the seccomp allowlist)"
KINDS = (
    _row(
        "memory", "memory a child inherits", *[(OWN, "forked from a server that never holds a student's data: only its own")] * 5
    ),
    _row(
        "grading_files",
        "grading files (kit, source, solutions, classmates' submissions and results), whatever their mode",
        (REFUSED, "not in the server's root, nor in the child's own"),
        (REFUSED, "not in the child's own root (only the system, Python and the sandbox's own code)"),
        (REFUSED, "refused by Landlock (reads only below the system, Python and the sandbox's own code)"),
        (
            REFUSED,
            "closed to other users by permissions for as long as grading runs, then given back (and a way "
            "through, o+x, to Python where a folder above it was closed)",
        ),
        (OPEN, "**readable**: refused unless `--unsafe`"),
    ),
    _row(
        "other_files",
        "any other file of the machine (an instructor's stray solved notebook)",
        (REFUSED, "not there"),
        (REFUSED, "not there"),
        (REFUSED, "refused by Landlock"),
        (OPEN, "**readable if the world may read it**"),
        (OPEN, "readable"),
    ),
    _row(
        "writable_places",
        "files it writes",
        (OWN, "its own sized tmpfs /tmp, /var/tmp, /dev/shm, /run/lock, dropped whole with the child; nothing of the host"),
        (OWN, "same"),
        (
            REMOVED,
            "its working directory only (in the host's /tmp), watched: a run whose files there pass `tmp_mb` is "
            "stopped (it may pass it by what it writes between two looks, 10 ms apart); removed after each run",
        ),
        (
            REMOVED,
            "its working directory and the world-writable folders of the host (/tmp, /var/tmp, /dev/shm, "
            "/run/lock and every other found by a walk of the local file systems): what it makes is its own "
            "(umask 077, permission changes refused) and is removed when the job ends",
        ),
        (OPEN, "its working directory, removed after each run; elsewhere what its user may write may persist"),
    ),
    _row(
        "processes",
        "processes and threads, and everything they start",
        (
            REMOVED,
            "own PID namespace; as root a user of its own per job; one control group per run where the grader "
            "may make one (root, or an instructor her administrator delegated a group to, as systemd's "
            "`Delegate=yes` does: memory and process limits for the job as a whole; elsewhere per process); "
            "CPU-time limits with wall-clock "
            "backstops `wall_factor` times longer; all killed when the job ends (everything below its supervisor, "
            "stopped first so that a fork bomb forks no more: also where no user of its own marks them)",
        ),
        (REMOVED, "`/proc` shows only its own; a user of its own per job; same limits; all killed"),
        (
            REMOVED,
            "a user of its own per job (Landlock also stops signals, and refuses every process's `/proc` entries but "
            "its own: its own children's too); same limits; all killed",
            False,
        ),
        (REMOVED, "a user of its own per job; same limits; all killed"),
        (REMOVED, "visible; its session and what it started killed"),
    ),
    _row(
        "other_processes",
        "other processes (the server, the supervisors, classmates'): their limits, priority, CPUs, signals, memory, "
        "`/proc` entries",
        (
            REFUSED,
            "a call that names a process goes through only on the caller itself (the seccomp allowlist, by argument: "
            "0 or its own id), so nothing of the server's processes changes, whose limits every later child "
            "inherits, though run by an instructor who is not root they have its uid; reading another's memory "
            "refused; `/proc` shows its own job's processes (as root) or the server's (run by an instructor who is "
            "not root: their command lines, nothing of a student's)",
        ),
        (REFUSED, "calls that name a process: only on itself, as with bubblewrap; `/proc` shows its own job's processes only"),
        (REFUSED, "calls: only on itself; `/proc` entries of every other process refused by Landlock"),
        (OPEN, "calls: only on itself; **every process's command line readable** in the host's `/proc`"),
        (OPEN, "same"),
    ),
    _row(
        "shared_files",
        "locks and the page cache of files every student may read (the standard library, the system)",
        *[
            (
                REFUSED,
                "record, open-file and whole-file locks refused, and every call that probes or steers the page cache "
                "(mincore, fadvise, readahead, cachestat, reads with RWF_NOWAIT) (the seccomp allowlist); how long "
                "a read takes is not: see below",
            )
        ]
        * 5,
    ),
    _row(
        "sysv_ipc",
        "System V shared memory, semaphores and message queues",
        (OWN, "its own per child (IPC namespace)"),
        (OWN, "its own per child (IPC namespace)"),
        (REFUSED, SECCOMP),
        (REFUSED, SECCOMP),
        (REFUSED, SECCOMP),
    ),
    _row(
        "posix_ipc",
        "POSIX message queues and shared memory",
        (OWN, "its own per child (IPC namespace, its own /dev/shm)"),
        (OWN, "same"),
        (REFUSED, "queues refused (seccomp), /dev/shm refused by Landlock"),
        (REMOVED, "queues refused (seccomp); shared memory is a file in /dev/shm, removed when the job ends"),
        (OPEN, "queues refused (seccomp); shared memory in /dev/shm may persist"),
    ),
    _row(
        "abstract_sockets",
        "abstract Unix sockets",
        (
            REMOVED,
            "in the server's empty network namespace, which serves one job at a time, and killed with the "
            "job (Landlock also keeps each child to its own)",
        ),
        (OWN, "its own per child (network namespace)"),
        (REFUSED, SECCOMP + "; Landlock scopes them too"),
        (REFUSED, SECCOMP),
        (REFUSED, SECCOMP),
    ),
    _row(
        "key_rings",
        "key rings",
        (
            REFUSED,
            SECCOMP + "; a new session key ring for the server, each job and each child; a user namespace of its own per child",
        ),
        (REFUSED, "same"),
        (REFUSED, SECCOMP + "; a new session key ring for the server, each job and each child"),
        (REFUSED, "same"),
        (REFUSED, "same"),
    ),
    _row(
        "cgroups",
        "control groups",
        (REFUSED, "read-only; its job's group is the grader's"),
        (REFUSED, "same"),
        (REFUSED, "not writable by its user; Landlock refuses writes to /sys"),
        (REFUSED, "not writable by its user"),
        (OPEN, "refused by Landlock where the kernel has it, else what its user may write"),
    ),
    _row(
        "timers_and_clocks",
        "timers and clocks",
        (REMOVED, "its timers end with its processes; setting a clock " + SECCOMP),
        (REMOVED, "same"),
        (REMOVED, "same"),
        (REMOVED, "same"),
        (REMOVED, "same"),
    ),
    _row("watches", "inotify and fanotify", *[(REFUSED, SECCOMP)] * 5),
    _row(
        "descriptors",
        "eventfd, memfd and other descriptors handed on",
        *[
            (
                OWN,
                "a child starts with its channel, its output and /dev/null only; what it makes ends with its "
                "processes; taking another's (pidfd_getfd) " + SECCOMP,
            )
        ]
        * 5,
    ),
    _row(
        "network",
        "network",
        (
            REFUSED,
            "none: the server's own, empty network namespace, where Landlock (ABI 4 on) refuses every TCP "
            "bind and connect (without it: the server's loopback only, one job at a time, whatever listens "
            "killed with the job)",
        ),
        (REFUSED, "none (a network namespace of its own per child, nothing up)"),
        (REFUSED, "sockets refused (seccomp); TCP refused by Landlock too"),
        (REFUSED, "sockets refused (seccomp)"),
        (REFUSED, "sockets refused (seccomp)"),
    ),
    _row(
        "devices",
        "devices",
        (REFUSED, "null, zero, full, random, urandom (and the GPU's) only"),
        (REFUSED, "same"),
        (REFUSED, "Landlock allows only those"),
        (REMOVED, "the host's /dev as its user may open it; a terminal it opens ends with its processes"),
        (OPEN, "as its user may open them"),
    ),
    _row(
        "proc_and_sys",
        "/proc and /sys: host name, kernel settings",
        (REFUSED, "its own host name (UTS namespace) and read-only /sys; setting names " + SECCOMP),
        (REFUSED, "same"),
        (REFUSED, "setting names " + SECCOMP + "; kernel settings root's only"),
        (REFUSED, "same"),
        (REFUSED, "same"),
    ),
)
BY_NAME = {kind.name: kind for kind in KINDS}


def layer_of(layers: dict, bubblewrap: bool, root: bool) -> str:
    """The column of a running server (its `layers` as it reports them)."""
    if bubblewrap:
        return "bubblewrap"
    if not root:
        return "unsafe"
    if layers.get("namespaces"):
        return "namespaces"
    return "landlock" if layers.get("landlock") else "permissions"
