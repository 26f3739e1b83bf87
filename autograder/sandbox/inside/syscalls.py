"""The system calls a sandboxed child may make: an allowlist, by name. Everything else is refused.

The calls allowed always are `allowlist.ALLOWED` (how they were chosen is said there). Left out, so refused,
among others (`REFUSED` names one representative of each family, and a test makes each call in a child, in
every layer): key rings, bpf, perf events, userfaultfd, ptrace and reading another process's memory, mounts and
new namespaces, io_uring, kexec and kernel modules, personality changes, setting clocks, raw and packet sockets,
inotify and fanotify, file handles, changing users or capabilities, NUMA policies.

Numbers come from libseccomp (`seccomp.number`), never from a table typed here; names a machine's libseccomp
or architecture does not know are simply not allowed. Some calls are allowed only with arguments checked
(`CHECKED`, and `TARGETED`: the calls that name a process, allowed on the caller only), some only where a layer
closes what they reach (`GRANTS`).
"""

from __future__ import annotations

# Allowed with their arguments checked (the checks live in seccomp.py, on the argument's 32 low bits, which are
# all the kernel reads of each): clone without namespace flags (clone3, whose flags a filter cannot read, fails
# with ENOSYS so that the C library falls back to clone); ioctl with the terminal and descriptor requests Python
# makes (on a GPU: any request, see seccomp.py); prctl with the options below; socket and socketpair with the
# families and types below; personality only asked, never changed; fcntl with the commands of FCNTLS; preadv2 and
# pwritev2 without RWF_NOWAIT.
CHECKED = ("clone", "ioctl", "prctl", "socket", "socketpair", "personality", "fcntl", "preadv2", "pwritev2")
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
# fcntl: the commands Python and the C library use on descriptors. Not there, so refused: every record lock
# (F_GETLK, F_SETLK, F_SETLKW and their open-file forms F_OFD_*: a lock on a file two students may read is a
# message between them, whoever owns the file, and a filter cannot see whose file a descriptor names), leases,
# F_NOTIFY (a watch, as inotify), F_SETOWN_EX; F_SETOWN (who gets SIGIO) only to the caller or its group.
FCNTLS = {
    "F_DUPFD": 0,
    "F_GETFD": 1,
    "F_SETFD": 2,
    "F_GETFL": 3,
    "F_SETFL": 4,
    "F_GETOWN": 9,
    "F_SETSIG": 10,
    "F_GETSIG": 11,
    "F_GETOWN_EX": 16,
    "F_DUPFD_CLOEXEC": 1030,
    "F_SETPIPE_SZ": 1031,
    "F_GETPIPE_SZ": 1032,
    "F_ADD_SEALS": 1033,
    "F_GET_SEALS": 1034,
}
F_SETOWN = 8
LOCKS = {"F_GETLK": 5, "F_SETLK": 6, "F_SETLKW": 7, "F_OFD_GETLK": 36, "F_OFD_SETLK": 37, "F_OFD_SETLKW": 38}
# preadv2 and pwritev2 without RWF_NOWAIT (their last argument): a read that fails rather than wait says whether a
# page of a file is in the page cache, which another student's reads put there.
RWF_NOWAIT = 0x8
NOWAIT_CHECKED = {"preadv2": 5, "pwritev2": 5}

# The calls that name a process, allowed only on the caller itself: the argument at the index given names the
# process, and must be 0 (the caller) or the caller's own process id, as the child that installed the filter had
# it (`seccomp.build(own=...)`; a process it forks keeps that child's filter, so it may name the child, never
# itself by its own new id). kill may also name the caller's process group (0 or -own: the child starts a
# session of its own before any student code runs, so every group it can be in is one a student process made).
# For getpriority, setpriority and ioprio_get the first argument says what the second names: a process or a
# process group, never a user (every process of a uid, the grading server's where it runs as the same user).
# A thread names itself with 0 (its own thread id is not the process id, and is not known when the filter is
# made); tgkill and rt_tgsigqueueinfo reach the caller's own threads by naming its process. Nothing a child may
# do needs its children's ids: a process ends its own children through its process group, or they end with
# the job.
TARGETED = {
    "kill": 0,
    "tkill": 0,
    "tgkill": 0,
    "rt_sigqueueinfo": 0,
    "rt_tgsigqueueinfo": 0,
    "pidfd_open": 0,
    "prlimit64": 0,
    "getpriority": 1,
    "setpriority": 1,
    "ioprio_get": 1,
    "sched_setaffinity": 0,
    "sched_getaffinity": 0,
    "sched_getparam": 0,
    "sched_getscheduler": 0,
    "sched_getattr": 0,
    "sched_rr_get_interval": 0,
    "get_robust_list": 0,
    "getpgid": 0,
    "getsid": 0,
}
WHICH = {"getpriority": (0, 1), "setpriority": (0, 1), "ioprio_get": (1, 2)}  # PRIO_PROCESS, _PGRP; IOPRIO_WHO_*
GROUP_TOO = ("kill",)

# Argument checks a test switches off (`seccomp.build(checks_off=...)`, passed to a server by the parent only,
# never read from a job): to show that what they refuse is a real channel, and that refusing it closes it.
SWITCHES = {
    "other processes": "the process named by TARGETED's calls and by fcntl's F_SETOWN",
    "shared files": "file locks, RWF_NOWAIT and the page-cache calls of REFUSED['shared files']",
}

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
    # signalling by descriptor (a descriptor of /proc/<pid> names any process, and a filter cannot see which),
    # and setting the scheduling of any process: grading needs neither
    "other processes": (
        "pidfd_send_signal",
        "sched_setscheduler",
        "sched_setparam",
        "sched_setattr",
        "ioprio_set",
        "process_madvise",
        "process_mrelease",
    ),
    # locks on whole files, and the calls that read or steer which pages of a file are cached
    "shared files": ("flock", "mincore", "fadvise64", "readahead", "cachestat"),
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
