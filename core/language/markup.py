"""Markdown and inline HTML read as the words a page shows.

A documentation page writes links, images and HTML beside its words: `[the Deputy
role](../before/different_roles.md/#deputy)`, `![016](../../assets/slides/ir.016.jpeg)`,
`<code class="text-nowrap">`. Read as text, their targets and attributes become words: the
extracted graph had entities named after file paths and image files, and facts that read
"configuration file](/documentation/examples/…)". A page shows none of that: a link shows its
words, an image shows nothing a chat can, a tag shows its content.

What counts as a tag is an HTML element's name (the HTML standard's, not a guess): in operator
docs `<namespace>` and `<issuer-name>` are placeholders in the prose, words the page shows.

Code spans are kept as written: inside one, nothing is a link or a tag.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

from core.language.lexicon import words

# A code span: `…` (its backquotes balanced), kept as written.
CODE_SPAN = re.compile(r"(`+[^`]*`+)")
# An image: ![alt](target "title"), or one inside a link ([![badge](…)](…)).
_IMAGE = re.compile(r"!\[[^\]\n]*\]\([^)\n]*\)")
# A link: [words](target "title"). RELATIVE_LINK: one to another page of the same documents
# (no scheme): in a chat it leads nowhere.
LINK = re.compile(r"\[([^\]\n]*)\]\([^)\n]*\)")
RELATIVE_LINK = re.compile(r"\[([^\]\n]+)\]\((?![a-z][a-z0-9+.-]*:)[^)\s]*\)")
# A reference-style link's definition line: [id]: target "title".
_REFERENCE = re.compile(r"^[ ]{0,3}\[[^\]\n]+\]:[ \t]+\S+[^\n]*$", re.M)
# An autolink: <https://…>, <mailto:…>.
_AUTOLINK = re.compile(r"<(?:[a-z][a-z0-9+.-]*:|www\.)[^<>\s]+>", re.I)
_COMMENT = re.compile(r"<!--.*?-->", re.S)
# A kramdown attribute list ({:target="_blank"}): the page applies it, it shows nothing.
ATTRIBUTES = re.compile(r"\{:[^{}\n]*\}")
# The HTML standard's element names (and the obsolete ones pages still write).
HTML_ELEMENTS = words(
    """a abbr address area article aside audio b bdi bdo blockquote body br button canvas
    caption center cite code col colgroup data datalist dd del details dfn dialog div dl dt em
    embed fieldset figcaption figure font footer form h1 h2 h3 h4 h5 h6 head header hr html i
    iframe img input ins kbd label legend li link main map mark meta meter nav noscript object
    ol optgroup option output p param picture pre progress q rp rt ruby s samp script section
    select small source span strike strong style sub summary sup svg table tbody td template
    textarea tfoot th thead time title tr track tt u ul var video wbr path g"""
)
# A tag: an element's name after "<" or "</", then attributes or nothing, then ">" or "/>".
HTML_TAG = re.compile(r"</?([A-Za-z][\w-]*)(?:\s[^<>]*)?/?>")


def outside_code_spans(text: str, change: Callable[[str], str]) -> str:
    """`text` with `change` applied to the pieces between its code spans, which stay as
    written."""
    pieces = CODE_SPAN.split(text)
    for i in range(0, len(pieces), 2):  # the pieces between code spans
        pieces[i] = change(pieces[i])
    return "".join(pieces)


def _tag(match: re.Match[str]) -> str:
    return "" if match.group(1).lower() in HTML_ELEMENTS else match.group()


def without_tags(text: str) -> str:
    """Text without its HTML tags (an element's content stays); a placeholder written like a
    tag (`<namespace>`) is a word and stays."""
    return HTML_TAG.sub(_tag, text)


def reading_text(text: str) -> str:
    """The words a reader of the rendered page sees: links as their words, no images, no
    reference definitions or autolinks, no HTML tags, comments or attribute lists, character
    references as the characters. Code spans as written."""
    return outside_code_spans(_REFERENCE.sub("", _COMMENT.sub("", text)), _read)


def _read(piece: str) -> str:
    piece = _AUTOLINK.sub("", LINK.sub(r"\1", _IMAGE.sub("", piece)))
    return html.unescape(ATTRIBUTES.sub("", without_tags(piece)))


# A fenced code block, fence to fence: written to be run or read as is.
_FENCED = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n.*?^[ \t]*\1[^\n]*$", re.M | re.S)
# Front matter at the start of a page: "---", lines of YAML, "---".
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(?:(?![ \t]*---[ \t]*\n)[^\n]*\n){0,60}?---[ \t]*\n")
# An image of the documents' own (a relative path): a chat shows none.
_RELATIVE_IMAGE = re.compile(r"!\[[^\]\n]*\]\((?![a-z][a-z0-9+.-]*:)[^)\n]*\)")


def prompt_text(text: str) -> str:
    """A source's text as a model is shown it: what a reader of the answer could not follow
    is left out — front matter, the targets of links to other pages of the documents (their
    words stay), images of the documents, HTML comments and attribute lists. Code, fenced or
    in spans, is kept as written, and so is a link to a site (a reader can open it)."""
    text = _FRONT_MATTER.sub("", text, count=1)
    out: list[str] = []
    at = 0
    for fenced in _FENCED.finditer(text):
        out.append(_lean_prose(text[at : fenced.start()]))
        out.append(fenced.group())
        at = fenced.end()
    out.append(_lean_prose(text[at:]))
    return "".join(out)


def _lean_prose(text: str) -> str:
    return outside_code_spans(_COMMENT.sub("", text), _lean)


def _lean(piece: str) -> str:
    return ATTRIBUTES.sub("", RELATIVE_LINK.sub(r"\1", _RELATIVE_IMAGE.sub("", piece)))
