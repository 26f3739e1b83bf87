"""Autograder for the Pre-LN TransformerBlock assignment.

Kept empty on purpose: the sandbox server imports this package, and must not pull in any grading code.
"""
