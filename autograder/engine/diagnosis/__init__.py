"""Where a wrong forward first went wrong: the first divergent step (`first_step`, read from values by the walk of
`boundaries`, named by the rules of `steps`), and gradient-only mistakes (`cuts`), each named only where the grader's
replay with that one path cut reproduces the gradients.
"""
