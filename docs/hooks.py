"""MkDocs hook (mkdocs.yml `hooks:`): the docstrings are reST-flavoured, the site Markdown.

Names cited with a role (``:class:`X```, ``:func:`~a.b```) would show the role's text before
the code span, and a literal-block marker (``Example::``) its second colon; both are dropped
from the API reference pages.
"""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj):(?=<code>)")
_TILDE = re.compile(r"<code>~")
_LITERAL_MARKER = re.compile(r"::</p>")


def on_page_content(html: str, page: Any, **kwargs: Any) -> str:
    if not page.file.src_uri.startswith("reference/"):
        return html
    html = _TILDE.sub("<code>", _ROLE.sub("", html))
    return _LITERAL_MARKER.sub(":</p>", html)
