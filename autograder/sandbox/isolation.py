"""The isolation a sandbox server gives, in words: the string every result carries (`describe`), built from the
layers the server reports it could set up, and what it says where nothing isolates a submission (`UNSAFE`). How
each layer closes each kind of kernel object is the table of `kinds`.
"""

from __future__ import annotations

UNSAFE = "UNSAFE: not isolated (no bubblewrap, not root): the submission could read the grading files"
# root without bubblewrap, namespaces or Landlock: graded only where the instructor opted in (`--unsafe`)
PERMISSIONS_ONLY = (
    "UNSAFE: permissions only (neither namespaces nor Landlock): every process's command line and the files the "
    "world may read were readable to the submission, and what it wrote outside its folder was not sized"
)
# the same layer where the machine holds this one submission and nothing else (`--alone`: a Gradescope container)
ALONE = (
    "permissions only, on a machine that holds this one submission (a container of its own): no classmate's "
    "process or file was there to read"
)


def unisolated(isolation: str) -> bool:
    """Does a result's isolation say that it was graded where the kit refuses unless told `--unsafe`?"""
    return isolation.startswith("UNSAFE")


def describe(layers: dict, bubblewrap: bool, root: bool, alone: bool = False) -> str:
    """The isolation a server gives, as every result names it (`alone`: the machine holds one submission)."""
    if not (bubblewrap or root):
        return UNSAFE
    parts = [
        "fresh child per submission, forked from a server that never holds student data",
        "CPU-time, memory, process, output and answer-size limits",
        "a seccomp allowlist (only the system calls grading needs)"
        if layers.get("seccomp") == "allowlist"
        else "NO SECCOMP FILTER",
        "a new session key ring per server, job and child"
        if layers.get("session_keyring")
        else "the session key ring inherited by the server",
    ]
    if root:
        parts.append("an unprivileged user of its own per submission")
    if layers.get("user_namespace"):
        parts.append("a user namespace of its own per child")
    if layers.get("cgroups"):
        parts.append("one control group per submission")
    if bubblewrap:
        parts.append("bubblewrap: no network")
    if layers.get("namespaces"):
        parts.append(
            "namespaces: a root of its own per child (only the system, Python and the sandbox's own code; own /tmp, "
            "IPC and network)"
        )
    if layers.get("landlock"):
        parts.append("Landlock: reads only the system, Python and the sandbox's own code, writes only its own folder")
    if not (bubblewrap or layers.get("namespaces")):
        if not layers.get("landlock"):
            parts.append(
                "grading folders closed to other users by permissions while grading (other files the "
                "world may read stay readable)"
            )
        parts.append("sockets and IPC refused (seccomp)" if layers.get("no_sockets") else "NETWORK OPEN")
    if root and not (bubblewrap or layers.get("namespaces") or layers.get("landlock")):
        return f"{ALONE if alone else PERMISSIONS_ONLY}: " + "; ".join(parts)
    return "; ".join(parts)
