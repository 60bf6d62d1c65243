"""The mooncake-wire command-line tools, installed as programs: `mooncake-conformance` and `mooncake-peer`.

`python -m mooncake_wire ARGS` runs `mooncake-conformance ARGS`; `python -m mooncake_wire peer ARGS` runs
`mooncake-peer ARGS`. `find_program(name)` gives the path of either.
"""

import os
import sys
import sysconfig

__all__ = ["find_program"]


def find_program(name: str) -> str:
    """The path of the installed program `name` (`mooncake-conformance` or `mooncake-peer`)."""
    exe = name + (".exe" if sys.platform == "win32" else "")
    for scripts in (sysconfig.get_path("scripts"), sysconfig.get_path("scripts", f"{os.name}_user")):
        if scripts:
            path = os.path.join(scripts, exe)
            if os.path.isfile(path):
                return path
    raise FileNotFoundError(f"{exe} is not installed next to this Python ({sysconfig.get_path('scripts')})")
