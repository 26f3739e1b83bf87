"""Code that runs next to student code, inside the sandboxed child.

Nothing in this package knows the solution or decides a grade: it builds blocks from the public kit code,
runs the student's definitions on inputs derived from a seed, and reports what it observed. The trusted
parent (`autograder.grading`) runs the same probes on the reference and computes every verdict.
"""
