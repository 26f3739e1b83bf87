"""Autograder for the Pre-LN TransformerBlock assignment.

Kept empty on purpose: the sandbox server imports this package, and must not pull in any grading code.
"""

import sys as _sys

# jsonschema (imported by nbformat) imports `rfc3987_syntax` where it is installed, which compiles 39 grammars
# for an IRI format checker that notebook validation never uses: over a second on every command of the kit
# that reads a notebook. In the kit's own processes, where nothing has imported it yet, it is left out.
_sys.modules.setdefault("rfc3987_syntax", None)
