"""Where a wrong forward first went wrong, and why: the lesson's forward as a script (`script`), its single-step
mistakes (`edits`), the first divergent step (`first_step`, read from values by the walk of `boundaries`), and
gradient-only mistakes (`cuts`). Every cause named is one the grader has replayed.
"""
