"""bench/lib/write_section.py - puts a bench's report section into BENCHMARKS.md.

Usage: write_section.py BENCHMARKS_MD SECTION_FILE

The section starts with its `## ` title line: a section with the same title is replaced (up to the
next `## `), otherwise the section is appended.
"""

import pathlib
import sys

doc, section = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]).read_text()
title = section.splitlines()[0]
text = doc.read_text() if doc.exists() else "# Benchmarks\n"
if title in text:
    start = text.index(title)
    nxt = text.find("\n## ", start + len(title))
    text = text[:start] + section.rstrip() + "\n" + (text[nxt:] if nxt != -1 else "")
else:
    text = text.rstrip() + "\n\n" + section
doc.write_text(text)
