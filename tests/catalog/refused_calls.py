"""One call of every system call the sandbox refuses by family (`autograder.sandbox.inside.syscalls.REFUSED`),
made with arguments under which a privileged process without the filter gets an answer other than EPERM
(success, or an error about the arguments), so that an EPERM or ENOSYS is the filter's own refusal.

`probe_source()` is Python a child runs: it makes every call and reports, in one line, how many were refused and
which went through. `run_probes()` makes the same calls in this process (the tests fork for it, with and
without the filter). None of the calls changes the machine: every mount, module, clock, host name and swap call
names something that does not exist or asks nothing.
"""
from __future__ import annotations

from autograder.sandbox.inside import seccomp, syscalls

# call -> the arguments, as Python over the helpers of PRELUDE (the family is syscalls.REFUSED's)
ARGUMENTS = {
    "add_key": 'b"user", b"refused-probe", b"x", 1, -2',           # into the process's own key ring
    "keyctl": "0, -2, 0",                                            # KEYCTL_GET_KEYRING_ID of it, not made
    "request_key": 'b"user", b"refused-probe-missing", None, 0',
    "bpf": "-1, None, 0",
    "perf_event_open": "None, 0, -1, -1, 0",
    "userfaultfd": "-1",
    "ptrace": "-1, 0, 0, 0",
    "process_vm_readv": "os.getpid(), _iov(), 1, _iov(), 1, 0",      # its own memory
    "process_vm_writev": "os.getpid(), _iov(), 1, _iov(), 1, 0",
    "pidfd_getfd": "_pidfd(), 0, 0",
    "kcmp": "os.getpid(), os.getpid(), 0, 0, 0",
    "mount": 'None, b"/refused-probe-missing", None, 32, None',       # MS_REMOUNT of nothing
    "umount2": 'b"/refused-probe-missing", 0',
    "pivot_root": 'b"/refused-probe-missing", b"/refused-probe-missing"',
    "fsopen": 'b"refused-probe-fs", 0',
    "open_tree": '-100, b"/refused-probe-missing", 0',
    "move_mount": '-1, b"", -1, b"", 0',
    "chroot": 'b"/refused-probe-missing"',
    "unshare": "0",
    "setns": "-1, 0",
    "io_uring_setup": "1, None",
    "io_uring_enter": "-1, 0, 0, 0, None, 0",
    "io_uring_register": "-1, 0, None, 0",
    "kexec_load": "0, 0, None, 0x7FFF0000",
    "kexec_file_load": "-1, -1, 0, None, 0x7FFF0000",
    "init_module": 'None, 0, b""',
    "finit_module": '-1, b"", 0',
    "delete_module": 'b"refused_probe_missing", 0o4000',
    "reboot": "0, 0, 0, None",                                       # wrong magic: nothing happens
    "swapon": 'b"/refused-probe-missing", 0',
    "acct": 'b"/refused-probe-missing"',
    "syslog": "10, None, 0",                                         # the size of the kernel's log buffer
    "quotactl": "-1, None, 0, None",
    "personality": "0x0040000",                                      # ADDR_NO_RANDOMIZE, for itself
    "clock_settime": "1, _buf(16)",                                  # the monotonic clock cannot be set
    "settimeofday": "None, None",                                    # sets nothing
    "adjtimex": "_buf(208)",                                         # modes 0: only reads
    "clock_adjtime": "0, _buf(208)",
    "socket": "",                                                    # three: see RAW_SOCKETS
    "inotify_init1": "0",
    "fanotify_init": "0, 0",
    "name_to_handle_at": '-100, b"/", _buf(136, 128), _buf(4), 0',
    "open_by_handle_at": "-1, None, 0",
    "setuid": "os.getuid()",
    "setgid": "os.getgid()",
    "setgroups": "0, None",
    "setresuid": "-1, -1, -1",
    "capset": "_capabilities()",
    "sethostname": "None, 65",                                       # too long: changes nothing
    "setdomainname": "None, 65",
    "pidfd_send_signal": "_pidfd(), 0, None, 0",                     # signal 0 to itself
    "sched_setscheduler": "0, 0, _buf(8)",                           # itself, SCHED_OTHER, priority 0: as it is
    "sched_setparam": "0, _buf(8)",
    "sched_setattr": "0, _buf(56), 0",                               # size 0 (the first version), SCHED_OTHER
    "ioprio_set": "1, 0, 0",                                         # itself, no class: the default
    "process_madvise": "-1, None, 0, 0, 0",
    "process_mrelease": "-1, 0",
    "flock": "_ro(), 1",                                             # a shared lock on /etc/passwd
    "mincore": "_page(), 4096, _buf(8)",                             # a page of its own
    "fadvise64": "_ro(), 0, 0, 0",                                   # POSIX_FADV_NORMAL
    "readahead": "_ro(), 0, 4096",
    "cachestat": "_ro(), _buf(16), _buf(40), 0",                     # the cached pages of /etc/passwd
    "mbind": "None, 0, 0, None, 0, 0",
    "set_mempolicy": "0, None, 0",
    "migrate_pages": "0, 0, None, None",
    "move_pages": "0, 0, None, None, None, 0",
}
RAW_SOCKETS = {"socket AF_PACKET": "17, 3, 0", "socket AF_INET raw": "2, 3, 1", "socket AF_NETLINK": "16, 3, 0"}

PRELUDE = '''
import ctypes, errno, os, struct
_libc = ctypes.CDLL(None, use_errno=True)
def _buf(size, first=0):
    return ctypes.create_string_buffer(struct.pack("I", first) + bytes(size - 4))
_keep = ctypes.create_string_buffer(64)
def _iov():
    return ctypes.create_string_buffer(struct.pack("QQ", ctypes.addressof(_keep), 64))
def _pidfd():
    return os.pidfd_open(os.getpid())
def _ro():
    return os.open("/etc/passwd", os.O_RDONLY)
def _page():
    return ctypes.addressof(_keep) & ~4095
def _capabilities():
    header = ctypes.create_string_buffer(struct.pack("II", 0x20080522, 0))
    data = ctypes.create_string_buffer(24)
    _libc.syscall({capget}, header, data)
    return header, data
def _arg(value):
    return ctypes.c_long(value) if isinstance(value, int) else value
def _call(number, *args):
    flat = []
    for value in args:
        flat += list(value) if isinstance(value, tuple) else [value]
    ctypes.set_errno(0)
    result = _libc.syscall(ctypes.c_long(number), *[_arg(v) for v in flat])
    return result, ctypes.get_errno()
'''


def calls(arch: str | None = None) -> dict[str, tuple[int, str]]:
    """label -> (number, arguments) of every probe this architecture has (libseccomp's numbers)."""
    found = {}
    for family, names in syscalls.REFUSED.items():
        for name in names:
            number = seccomp.number(name, arch)
            if number is None:
                continue
            if name == "socket":
                found.update({label: (number, args) for label, args in RAW_SOCKETS.items()})
            else:
                found[name] = (number, ARGUMENTS[name])
    return found


def probe_source() -> str:
    """A cell that makes every probe and raises one line: how many were refused, and which went through."""
    lines = [PRELUDE.format(capget=seccomp.number("capget")), "_through = []"]
    for label, (number, args) in calls().items():
        lines.append(f"_r, _e = _call({number}, {args})")
        lines.append(f"if not (_r < 0 and _e in (errno.EPERM, errno.ENOSYS)): _through.append({label!r} + ' ' + "
                     f"(str(_r) if _r >= 0 else errno.errorcode.get(_e, str(_e))))")
    lines.append(f"raise RuntimeError('refused-family probe: ' + str({len(calls())} - len(_through)) + ' of "
                 f"{len(calls())} refused' + (': went through ' + ', '.join(_through) if _through else ''))")
    return "\n".join(lines) + "\n"


def run_probes() -> dict[str, tuple[int, int]]:
    """label -> (result, errno) of every probe, made in this process (fork before calling it)."""
    namespace: dict = {}
    exec(PRELUDE.format(capget=seccomp.number("capget")), namespace)
    answers = {}
    for label, (number, args) in calls().items():
        answers[label] = eval(f"_call({number}, {args})", namespace)
    return answers


def summary_phrase() -> str:
    return f"refused-family probe: {len(calls())} of {len(calls())} refused"
