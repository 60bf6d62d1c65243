"""`python -m mooncake_wire [peer] ARGS`: runs `mooncake-conformance ARGS` (or `mooncake-peer ARGS`)."""

import os
import sys

from mooncake_wire import find_program


def main() -> None:
    args = sys.argv[1:]
    name = "mooncake-conformance"
    if args[:1] == ["peer"]:
        name, args = "mooncake-peer", args[1:]
    program = find_program(name)
    if sys.platform == "win32":
        import subprocess

        sys.exit(subprocess.call([program, *args]))
    os.execv(program, [program, *args])


if __name__ == "__main__":
    main()
