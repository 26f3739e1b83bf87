"""Autograder for the Pre-LN TransformerBlock assignment, in four wings and the orchestrator between them:

    frontends/  the doors people use: the command line, the demo, grade-class and its report, the feedback
                page, nbgrader's plugins, Gradescope's results and bundle
    grading/    the orchestrator: one submission through the sandbox, then through the engine
    engine/     what a forward computed and what it earns: the questions asked (`engine.questions`, the only
                part that runs in the sandbox's children), reading the answers, the diagnosis, the checks,
                the rubric and the results
    sandbox/    running untrusted code: the trusted parent's side (`sandbox.parent`) and what runs inside the
                sandbox (`sandbox.inside`: the pristine server, a supervisor per job, confined children)
    course/     the assignment: its annotated source, the views built from it, the bundled sample class

Imports run one way: frontends -> grading -> engine, sandbox -> course, each wing importing only itself and the
wings below it. The engine and the sandbox never import each other: the sandbox runs the engine's questions by
module name (`course.kit.QUESTIONS`), and knows nothing of them. Two packages run inside the sandbox and import
nothing of the kit outside themselves: `sandbox.inside` and `engine.questions`. `tests/test_layout.py` keeps
these rules.

This file and the wings' own `__init__.py` files import nothing of the kit: the sandbox server imports them on
its way to the code it runs, and must not pull in any grading code.
"""

import sys as _sys

# jsonschema (imported by nbformat) imports `rfc3987_syntax` where it is installed, which compiles 39 grammars
# for an IRI format checker that notebook validation never uses: over a second on every command of the kit
# that reads a notebook. In the kit's own processes, where nothing has imported it yet, it is left out.
_sys.modules.setdefault("rfc3987_syntax", None)
