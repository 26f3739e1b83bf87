"""The system calls a sandboxed child may make: an allowlist, by name. Everything else is refused.

The calls allowed always are `allowlist.ALLOWED` (how they were chosen is said there). Left out, so refused,
among others (`REFUSED` names one representative of each family, and a test makes each call in a child, in
every layer): key rings, bpf, perf events, userfaultfd, ptrace and reading another process's memory, mounts and
new namespaces, io_uring, kexec and kernel modules, personality changes, setting clocks, raw and packet sockets,
inotify and fanotify, file handles, changing users or capabilities, NUMA policies.

Numbers come from libseccomp (`seccomp.number`), never from a table typed here; names a machine's libseccomp
or architecture does not know are simply not allowed. Some calls are allowed only with arguments checked
(`CHECKED`), some only where a layer closes what they reach (`GRANTS`).
"""

from __future__ import annotations

# Allowed with their arguments checked (the checks live in seccomp.py, on the argument's 32 low bits, which are
# all the kernel reads of each): clone without namespace flags (clone3, whose flags a filter cannot read, fails
# with ENOSYS so that the C library falls back to clone); ioctl with the terminal and descriptor requests Python
# makes (on a GPU: any request, see seccomp.py); prctl with the options below; socket and socketpair with the
# families and types below; personality only asked, never changed.
CHECKED = ("clone", "ioctl", "prctl", "socket", "socketpair", "personality")
ENOSYS = ("clone3",)
IOCTLS = {"TCGETS": 0x5401, "TIOCGWINSZ": 0x5413, "FIONREAD": 0x541B, "FIONBIO": 0x5421, "FIONCLEX": 0x5450, "FIOCLEX": 0x5451}
PRCTLS = {
    "PR_SET_PDEATHSIG": 1,
    "PR_GET_PDEATHSIG": 2,
    "PR_GET_DUMPABLE": 3,
    "PR_SET_DUMPABLE": 4,
    "PR_SET_NAME": 15,
    "PR_GET_NAME": 16,
    "PR_GET_SECCOMP": 21,
    "PR_CAPBSET_READ": 23,
    "PR_GET_TIMERSLACK": 30,
    "PR_GET_NO_NEW_PRIVS": 39,
    "PR_GET_TID_ADDRESS": 40,
    "PR_GET_THP_DISABLE": 42,
    "PR_GET_SPECULATION_CTRL": 52,
    "PR_SET_VMA": 0x53564D41,
}
NAMESPACE_FLAGS = {
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}
FAMILIES = {"AF_UNIX": 1, "AF_INET": 2, "AF_INET6": 10}  # socketpair: AF_UNIX only
SOCKET_TYPES = {"SOCK_STREAM": 1, "SOCK_DGRAM": 2, "SOCK_SEQPACKET": 5}  # (type & 0xf): no SOCK_RAW, SOCK_PACKET
PERSONALITY_QUERY = 0xFFFFFFFF

# Allowed only in the layers that close what they reach (the server grants them by what it could set up):
# sockets and IPC where each child has network and IPC namespaces of its own; changing permission bits, ACLs and
# the umask where namespaces or Landlock keep it to places of its own (elsewhere whatever it makes stays 0600).
GRANTS = {
    "sockets": ("socket",),
    "ipc": (
        "shmget",
        "shmat",
        "shmdt",
        "shmctl",
        "semget",
        "semop",
        "semtimedop",
        "semctl",
        "msgget",
        "msgsnd",
        "msgrcv",
        "msgctl",
        "mq_open",
        "mq_unlink",
        "mq_timedsend",
        "mq_timedreceive",
        "mq_notify",
        "mq_getsetattr",
    ),
    "permissions": (
        "chmod",
        "fchmod",
        "fchmodat",
        "fchmodat2",
        "umask",
        "setxattr",
        "lsetxattr",
        "fsetxattr",
        "removexattr",
        "lremovexattr",
        "fremovexattr",
    ),
}

# One representative call of each refused family, with arguments that would succeed for a privileged process
# where that matters (the refused-family test makes each in a child and expects it to fail).
REFUSED = {
    "key rings": ("add_key", "keyctl", "request_key"),
    "bpf": ("bpf",),
    "perf events": ("perf_event_open",),
    "userfaultfd": ("userfaultfd",),
    "other processes' memory": ("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp"),
    "mounts": ("mount", "umount2", "pivot_root", "fsopen", "open_tree", "move_mount", "chroot"),
    "namespaces": ("unshare", "setns"),
    "io_uring": ("io_uring_setup", "io_uring_enter", "io_uring_register"),
    "kernel": (
        "kexec_load",
        "kexec_file_load",
        "init_module",
        "finit_module",
        "delete_module",
        "reboot",
        "swapon",
        "acct",
        "syslog",
        "quotactl",
    ),
    "personality": ("personality",),
    "clocks": ("clock_settime", "settimeofday", "adjtimex", "clock_adjtime"),
    "raw sockets": ("socket",),
    "watching files": ("inotify_init1", "fanotify_init", "name_to_handle_at", "open_by_handle_at"),
    "users and capabilities": ("setuid", "setgid", "setgroups", "setresuid", "capset"),
    "host name": ("sethostname", "setdomainname"),
    "numa": ("mbind", "set_mempolicy", "migrate_pages", "move_pages"),
}
