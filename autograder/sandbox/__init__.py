"""Running untrusted code. `parent` is the trusted parent's side: starting servers and talking to them
(`client`), the servers of one grading run (`pool`), what a submission must not see (`containment`), bubblewrap's
command (`bubblewrap`) and the permission leases of the permissions-only layer (`hostperms`). `inside` runs in the
sandbox: the pristine server, a supervisor per job, confined children.

The sandbox knows nothing of the questions it runs: the parent names their module, and a child runs its job
with it. Nothing here imports the engine.
"""
