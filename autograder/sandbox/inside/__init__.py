"""What runs inside the sandbox: the pristine server (`server`), one supervisor per job (`supervisor`, `watch`,
`cleanup`, `jobs`, `processes`), and confined children (`child`, `confine`, `rootfs`, `landlock`, `seccomp`), talking
to the parent over `protocol`.

Nothing here knows the solution, the questions or a grade: a child runs its job with the questions' module the
parent named, and reports what it observed. Imports nothing of the kit outside this package.
"""
