#!/usr/bin/env python3
"""Replace (or append) one `## ` section of a Markdown file with the text on stdin, for the
benches that write their section in shell (bench/memory.sh, bench/soak.sh).  The section's first
line is its heading; replacement is summarize.py's.  Standard library only.

Usage: update_section.py BENCHMARKS.md < SECTION.md
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from summarize import replace_section  # noqa: E402


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    section = sys.stdin.read()
    heading = section.split("\n", 1)[0]
    if not heading.startswith("## "):
        sys.exit("update_section.py: the section must start with a '## ' heading")
    replace_section(sys.argv[1], heading, section.rstrip("\n") + "\n")


if __name__ == "__main__":
    main()
