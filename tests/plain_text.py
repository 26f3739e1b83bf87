"""What "text only" means in the tests of the kit's writers, from Unicode's own classes rather than the kit's list:
a character is text when its general category is a letter, mark, number, punctuation, symbol or the space, and it
is not in Default_Ignorable_Code_Point (copied from the Unicode Character Database's DerivedCoreProperties.txt)
nor the braille blank, which fonts draw as an empty cell."""

import unicodedata

# DerivedCoreProperties.txt (Unicode 15.1), Default_Ignorable_Code_Point: every range
DEFAULT_IGNORABLE = [
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F),
    (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
]  # fmt: skip
BRAILLE_BLANK = "\u2800"


def is_text(character: str) -> bool:
    """A character that shows as itself."""
    code = ord(character)
    category = unicodedata.category(character)
    if category[0] == "C" or category in ("Zl", "Zp") or (category == "Zs" and character != " "):
        return False
    return character != BRAILLE_BLANK and not any(low <= code <= high for low, high in DEFAULT_IGNORABLE)


def assert_text(value: str, line_breaks: bool = False) -> None:
    """Every character of `value` is text (`line_breaks`: a line break may stand too, the writer's own)."""
    bad = [c for c in value if not is_text(c) and not (line_breaks and c == "\n")]
    assert not bad, (value, [f"U+{ord(c):04X}" for c in bad])


def letters(value: str) -> str:
    """What of `value` no writer may lose: its letters, digits, punctuation and symbols that are text, in order."""
    return "".join(c for c in value if unicodedata.category(c)[0] in "LNPS" and is_text(c))


def keeps(written: str, value: str) -> bool:
    """Whether `written` shows every letter, digit, punctuation mark and symbol of `value`, in order."""
    found = iter(written)
    return all(c in found for c in letters(value))  # a subsequence
