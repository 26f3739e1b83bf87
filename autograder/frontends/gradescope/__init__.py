"""Gradescope: the results.json every front end writes (`results`) and the autograder zip (`bundle`)."""
