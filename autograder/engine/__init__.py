"""What a forward computed and what it earns.

* `questions`: the grader's questions (the plan, the probes) and a child's job; the only part run inside the
  sandbox, by module name;
* `reading`: the child's answers read strictly, a recorded run named in the grader's own terms, and the
  grader's replays of it;
* `diagnosis`: where a wrong forward first went wrong, said as facts the grader read from its values;
* `checks`, `rubric`, `results`: the verdicts, their points, and results as data.

Nothing here starts a process or reads a file: the orchestrator (`grading`) hands it the answers.
"""
