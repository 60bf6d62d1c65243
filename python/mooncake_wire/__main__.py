"""`python -m mooncake_wire [peer | review | precommit] ARGS`.

With no keyword it runs `mooncake-conformance ARGS`; `peer` runs `mooncake-peer ARGS`; `review` runs the wire
review of a vLLM change (the GitHub Action's report: `review --old-ref REF --new CHECKOUT`); `precommit` runs the
pre-commit hook (the review of what a commit stages against `HEAD`). The last two are bash scripts shipped in this
package.
"""

import os
import sys

from mooncake_wire import find_program

SCRIPTS = {"review": "review.sh", "precommit": "precommit.sh"}


def main() -> None:
    args = sys.argv[1:]
    if args[:1] and args[0] in SCRIPTS:
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), SCRIPTS[args[0]])
        program, args = "bash", [script, *args[1:]]
    else:
        name = "mooncake-conformance"
        if args[:1] == ["peer"]:
            name, args = "mooncake-peer", args[1:]
        program = find_program(name)
    if sys.platform == "win32":
        import subprocess

        sys.exit(subprocess.call([program, *args]))
    os.execvp(program, [program, *args])


if __name__ == "__main__":
    main()
