#!/usr/bin/env python3
"""Puts a generated block into BENCHMARKS.md between its markers, `<!-- NAME:begin -->` and `<!-- NAME:end -->`
(the block carries them), leaving the rest of the file as it is; appends the block when the markers are not
there yet. The bench scripts each own one such section.

usage: put_section.py NAME BLOCK_FILE [MARKDOWN_FILE (default BENCHMARKS.md)]
"""
import re
import sys


def main():
    name, block_file = sys.argv[1], sys.argv[2]
    path = sys.argv[3] if len(sys.argv) > 3 else "BENCHMARKS.md"
    block = open(block_file).read().rstrip("\n")
    if not block.startswith(f"<!-- {name}:begin -->") or not block.endswith(f"<!-- {name}:end -->"):
        sys.exit(f"put_section.py: {block_file} is not between the {name} markers")
    text = open(path).read()
    pat = re.compile(rf"<!-- {re.escape(name)}:begin -->.*?<!-- {re.escape(name)}:end -->", re.S)
    text = pat.sub(lambda m: block, text) if pat.search(text) else text.rstrip("\n") + "\n\n" + block + "\n"
    open(path, "w").write(text)


if __name__ == "__main__":
    main()
