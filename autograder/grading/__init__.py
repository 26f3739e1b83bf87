"""The orchestrator: one submission through the sandbox, then through the engine.

* `reference`: the grader's own answers to a plan, from the annotated source's reference solution;
* `evaluation`: every check on one sandbox reply;
* `submission`: grading a submission's cells or file with a sandbox server;
* `inprocess`: the same checks without a sandbox, for the student's own notebook.
"""
