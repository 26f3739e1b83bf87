"""The assignment: its annotated source (`kit`), reading notebooks (`notebook`), the views built from the
source (`build`) and the bundled sample class (`sample_class`). Imports nothing of the other wings.
"""
