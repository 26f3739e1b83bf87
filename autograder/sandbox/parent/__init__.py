"""The trusted parent's side of the sandbox: starting servers and talking to them (`client`), the servers of one
grading run (`pool`), what a submission must not see (`containment`), bubblewrap's command (`bubblewrap`),
permission leases (`hostperms`).
"""
