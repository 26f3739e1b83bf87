"""The system calls a sandboxed child may make: an allowlist, by name. Everything else is refused.

It starts from the calls Docker's default seccomp profile allows (moby/profiles, seccomp/default.json), which
Gradescope, PrairieLearn and Otter inherit, and keeps only what running a student's torch code needs: files in
the places the other layers leave it, memory, threads and processes of its own, time, waiting, signals. Left
out, so refused, among others (`REFUSED` names one representative of each family, and a test makes each call in
a child, in every layer): key rings, bpf, perf events, userfaultfd, ptrace and reading another process's
memory, mounts and new namespaces, io_uring, kexec and kernel modules, personality changes, setting clocks, raw
and packet sockets, inotify and fanotify, file handles, changing users or capabilities, NUMA policies.

Numbers come from libseccomp (`seccomp.number`), never from a table typed here; names a machine's libseccomp
or architecture does not know are simply not allowed. Some calls are allowed only with arguments checked
(`CHECKED`), some only where a layer closes what they reach (`GRANTS`).
"""
from __future__ import annotations

ALLOWED = {
    # reading and writing what it may open (the private root, Landlock and the uid decide what that is)
    "files": ("read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "preadv2", "pwritev",
              "pwritev2", "open", "openat", "openat2", "creat", "close", "close_range", "lseek", "dup", "dup2",
              "dup3", "pipe", "pipe2", "fcntl", "flock", "fsync", "fdatasync", "ftruncate", "truncate",
              "fallocate", "fadvise64", "readahead", "sendfile", "copy_file_range", "splice"),
    "file names": ("stat", "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs", "access", "faccessat",
                   "faccessat2", "getdents", "getdents64", "getcwd", "chdir", "fchdir", "mkdir", "mkdirat", "rmdir",
                   "unlink", "unlinkat", "rename", "renameat", "renameat2", "link", "linkat", "symlink",
                   "symlinkat", "readlink", "readlinkat", "utime", "utimes", "utimensat", "getxattr", "lgetxattr",
                   "fgetxattr", "listxattr", "llistxattr", "flistxattr"),
    "memory": ("brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "mincore", "msync", "mlock", "mlock2",
               "munlock", "membarrier", "memfd_create", "map_shadow_stack"),
    # its own processes and threads (namespace flags checked on clone, see CHECKED)
    "processes": ("fork", "vfork", "execve", "execveat", "exit", "exit_group", "wait4", "waitid", "kill", "tkill",
                  "tgkill", "pidfd_open", "pidfd_send_signal", "getpid", "getppid", "gettid", "getpgid",
                  "getpgrp", "getsid", "setsid", "setpgid", "getuid", "geteuid", "getgid", "getegid", "getresuid",
                  "getresgid", "getgroups", "capget", "set_tid_address", "set_robust_list", "get_robust_list",
                  "rseq", "arch_prctl", "restart_syscall", "getrlimit", "setrlimit", "prlimit64", "getrusage",
                  "times", "sysinfo", "uname", "getrandom", "getpriority", "setpriority", "getcpu", "ioprio_get"),
    "threads": ("futex", "futex_waitv", "futex_wake", "futex_wait", "futex_requeue", "sched_yield",
                "sched_getaffinity", "sched_setaffinity", "sched_getparam", "sched_getscheduler", "sched_getattr",
                "sched_get_priority_max", "sched_get_priority_min", "sched_rr_get_interval"),
    "signals": ("rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending", "rt_sigtimedwait",
                "rt_sigsuspend", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "sigaltstack", "signalfd", "signalfd4",
                "pause"),
    # reading clocks and its own timers (setting a clock is refused: settimeofday, clock_settime, adjtimex)
    "time": ("clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time", "alarm",
             "getitimer", "setitimer", "timer_create", "timer_settime", "timer_gettime", "timer_getoverrun",
             "timer_delete", "timerfd_create", "timerfd_settime", "timerfd_gettime"),
    "waiting": ("poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1", "epoll_ctl",
                "epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2"),
    # a socket pair (an anonymous, connected pair: multiprocessing) and what any socket it holds may do
    "socket use": ("bind", "listen", "accept", "accept4", "connect", "getsockname", "getpeername", "sendto",
                   "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg", "shutdown", "setsockopt",
                   "getsockopt"),
}

# Allowed with their arguments checked (the checks live in seccomp.py, on the argument's 32 low bits, which are
# all the kernel reads of each): clone without namespace flags (clone3, whose flags a filter cannot read, fails
# with ENOSYS so that the C library falls back to clone); ioctl with the terminal and descriptor requests Python
# makes (on a GPU: any request, see seccomp.py); prctl with the options below; socket and socketpair with the
# families and types below; personality only asked, never changed.
CHECKED = ("clone", "ioctl", "prctl", "socket", "socketpair", "personality")
ENOSYS = ("clone3",)
IOCTLS = {"TCGETS": 0x5401, "TIOCGWINSZ": 0x5413, "FIONREAD": 0x541B, "FIONBIO": 0x5421, "FIONCLEX": 0x5450,
          "FIOCLEX": 0x5451}
PRCTLS = {"PR_SET_PDEATHSIG": 1, "PR_GET_PDEATHSIG": 2, "PR_GET_DUMPABLE": 3, "PR_SET_DUMPABLE": 4,
          "PR_SET_NAME": 15, "PR_GET_NAME": 16, "PR_GET_SECCOMP": 21, "PR_CAPBSET_READ": 23,
          "PR_GET_TIMERSLACK": 30, "PR_GET_NO_NEW_PRIVS": 39, "PR_GET_TID_ADDRESS": 40, "PR_GET_THP_DISABLE": 42,
          "PR_GET_SPECULATION_CTRL": 52, "PR_SET_VMA": 0x53564D41}
NAMESPACE_FLAGS = {"CLONE_NEWNS": 0x00020000, "CLONE_NEWCGROUP": 0x02000000, "CLONE_NEWUTS": 0x04000000,
                   "CLONE_NEWIPC": 0x08000000, "CLONE_NEWUSER": 0x10000000, "CLONE_NEWPID": 0x20000000,
                   "CLONE_NEWNET": 0x40000000}
FAMILIES = {"AF_UNIX": 1, "AF_INET": 2, "AF_INET6": 10}         # socketpair: AF_UNIX only
SOCKET_TYPES = {"SOCK_STREAM": 1, "SOCK_DGRAM": 2, "SOCK_SEQPACKET": 5}   # (type & 0xf): no SOCK_RAW, SOCK_PACKET
PERSONALITY_QUERY = 0xFFFFFFFF

# Allowed only in the layers that close what they reach (the server grants them by what it could set up):
# sockets and IPC where each child has network and IPC namespaces of its own; changing permission bits, ACLs and
# the umask where namespaces or Landlock keep it to places of its own (elsewhere whatever it makes stays 0600).
GRANTS = {
    "sockets": ("socket",),
    "ipc": ("shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop", "semctl", "msgget", "msgsnd",
            "msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify",
            "mq_getsetattr"),
    "permissions": ("chmod", "fchmod", "fchmodat", "fchmodat2", "umask", "setxattr", "lsetxattr", "fsetxattr",
                    "removexattr", "lremovexattr", "fremovexattr"),
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
    "kernel": ("kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot", "swapon",
               "acct", "syslog", "quotactl"),
    "personality": ("personality",),
    "clocks": ("clock_settime", "settimeofday", "adjtimex", "clock_adjtime"),
    "raw sockets": ("socket",),
    "watching files": ("inotify_init1", "fanotify_init", "name_to_handle_at", "open_by_handle_at"),
    "users and capabilities": ("setuid", "setgid", "setgroups", "setresuid", "capset"),
    "host name": ("sethostname", "setdomainname"),
    "numa": ("mbind", "set_mempolicy", "migrate_pages", "move_pages"),
}
