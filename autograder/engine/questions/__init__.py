"""The grader's questions and how a sandboxed child answers them: the plan (`plan`), the blocks built from the
public kit (`parts`), what a forward did (`recording`), the probes (`probes`), Task 2's chains (`chains`), loading
cells (`cells`) and one job (`job`, the module the sandbox runs by name).

Run inside the sandbox: these modules import nothing of the kit outside this package.
"""
