"""The kit inside nbgrader: the sandboxed executor (`bridge`), the release and sanitizing plugins (`plugins`),
the checks before autograding (`preflight`), grades written into notebooks (`annotate`), the feedback page
(`feedback`), the export (`export`) and grade-class's course recorder (`recorder`).
"""
