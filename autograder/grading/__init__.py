"""The orchestrator: one submission through the sandbox, then through the engine.

* `options`: how every submission of a run is graded (`GradingOptions`: seed, device, assignment, isolation...);
* `reference`: the grader's own answers to a plan, from the annotated source's reference solution;
* `evaluation`: every check on one sandbox reply;
* `submission`: grading a submission's cells or file with a sandbox server;
* `single`: one submission on a sandbox server of its own, the reference computed while it warms up;
* `inprocess`: the same checks without a sandbox (`InProcess` stands where a sandbox server stands): for the tests of
  what a submission earns and the benchmarks' baselines, never for grading a student.
"""
