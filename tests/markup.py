"""A page as an HTML parser reads it, for the tests of what a student's text can do to a page: its markup (each
element with the names of its attributes) apart from its text and its attributes' values."""

from html.parser import HTMLParser

# what a student controls, made to break out of text and of a quoted attribute, with an entity and non-ASCII
HOSTILE = "<script>alert(\"x&y\")</script><img src=x onerror='alert(1)'> O'Brien & &amp; café — 日本語"


class Parsed(HTMLParser):
    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self.markup, self.text, self.values = [], "", []
        self.feed(page)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.markup.append((tag, tuple(name for name, _ in attrs)))
        self.values += [value for _, value in attrs if value is not None]

    def handle_endtag(self, tag):
        self.markup.append(("/" + tag, ()))

    def handle_data(self, data):
        self.text += data
