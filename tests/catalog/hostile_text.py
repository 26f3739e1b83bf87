"""Text a student controls that a writer could show as something else: the cases that were reported, kept as
regression examples for the properties of tests/frontends/test_writers.py and test_student_ids.py.

* terminal escape sequences in an exception message: a window title, an OSC 52 clipboard write, the cursor moved
  up and the line erased to draw a fake score line, C1 controls (CSI, OSC, ST as single bytes), a DCS string;
* a right-to-left override that makes "\u202e42 erocs" read "score 24";
* four student ids that read "alice" (Latin, a Cyrillic a, a braille blank, a Hangul filler), and "josé"
  written two ways (NFC, NFD);
* look-alike letters from Unicode's confusables.txt (each reads as the Latin letter beside it).
"""

ESCAPE_SEQUENCES = [
    "\x1b]0;grades are in\x07",  # window title (OSC 0), ended by BEL
    "\x1b]2;pwned\x1b\\",  # window title (OSC 2), ended by ST
    "\x1b]52;c;ZWNobyBvd25lZA==\x07",  # OSC 52: write the clipboard
    "\x1b[1A\x1b[2K\rScore: 24 / 24",  # cursor up, erase the line, a score line of the student's
    "\x1b[31m",  # colour
    "\x9b1A\x9b2K",  # the same with C1 CSI
    "\x9d0;title\x9c",  # C1 OSC ... ST
    "\x1bP+q544e\x1b\\",  # DCS: a terminal query
    "\x07\x08\x08\x08",  # bell, backspaces over the text before
]
RTL_SCORE = "\u202e42 erocs"
ALICES = ["alice", "\u0430lice", "alice\u2800", "alice\u3164"]
JOSE = ["jos\u00e9", "jose\u0301"]
ISSUE_EXAMPLES = ESCAPE_SEQUENCES + [RTL_SCORE] + ALICES + JOSE
# source -> the letter it reads as (Unicode's confusables.txt, "MA" lines)
LOOKALIKES = {
    "\u0430": "a",  # CYRILLIC SMALL LETTER A
    "\u0435": "e",  # CYRILLIC SMALL LETTER IE
    "\u0440": "p",  # CYRILLIC SMALL LETTER ER
    "\u0445": "x",  # CYRILLIC SMALL LETTER HA
    "\u0443": "y",  # CYRILLIC SMALL LETTER U
    "\u0455": "s",  # CYRILLIC SMALL LETTER DZE
    "\u04bb": "h",  # CYRILLIC SMALL LETTER SHHA
    "\u051b": "q",  # CYRILLIC SMALL LETTER QA
    "\u0261": "g",  # LATIN SMALL LETTER SCRIPT G
    "\u0501": "d",  # CYRILLIC SMALL LETTER KOMI DE
    "\u0131": "i",  # LATIN SMALL LETTER DOTLESS I
    "\u03bd": "v",  # GREEK SMALL LETTER NU
    "\u0585": "o",  # ARMENIAN SMALL LETTER OH
    "\u1d20": "v",  # LATIN LETTER SMALL CAPITAL V
    "\u1d22": "z",  # LATIN LETTER SMALL CAPITAL Z
    "\uff41": "a",  # FULLWIDTH LATIN SMALL LETTER A
    "\U0001d41b": "b",  # MATHEMATICAL BOLD SMALL B
    "\U0001d68d": "d",  # MATHEMATICAL MONOSPACE SMALL D
}
