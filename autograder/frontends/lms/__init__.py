"""Grades into a course's learning management system: the gradebook file the LMS itself exported, read as the roster
(`table`: strictly, inside a fence: it holds students' names), each row matched to a student of nbgrader's gradebook
by an equality the instructor names (`match`), and the file the LMS imports written from each student's standing
(`canvas`, `moodle`, each value through `grades`). Pure: no nbgrader here; `autograder.frontends.nbgrader.lms` reads
the standings and is the door, and `command` its command line (`lms-export`).
"""
