"""Hand-written submissions for testing the grader: wrong forwards, equivalent forwards, Task 2 mistakes,
hostile code. Each entry is source text; `submission()` turns it into a complete `.py` submission."""
