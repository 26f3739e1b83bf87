"""Reading what a forward computed: the child's answers read strictly (`answers`), a run named as a program of
the block's components (`program`, `placement`, `normfit`, `grouping`, `naming`, `dataflow`), and the grader's own
replays of it (`replays`).
"""
