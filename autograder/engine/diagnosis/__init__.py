"""Where a wrong forward first went wrong: the first divergent step (`first_step`: the first of Pre-LN's equations
that does not hold on a run, named by the rules of `steps` from what the component there received, against
Pre-LN's own values on the same input, `chain`; a sum read term by term, `sums`, `moves`), and gradient-only
mistakes (`cuts`), each named only where the grader's replay with that one path cut reproduces the gradients.
"""
