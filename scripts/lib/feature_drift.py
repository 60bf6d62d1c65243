#!/usr/bin/env python3
"""Whether packages built alone resolve their dependencies' features as the workspace's test build does.

`cargo install` and the wheel's maturin build compile one package alone. When that package's dependencies get the
features the workspace's build gave them, its build is the test build's (the wheel's build links the test build's
artifacts in seconds, and the package builds alone because the workspace's build of it did). When they drift apart,
the wheel's build compiles the whole tree a second time (about two minutes of the test command on 2 cores) and
nothing else says why. Prints each package whose features differ and exits 1; exits 0 when all agree.

Usage: scripts/lib/feature_drift.py PACKAGE[+FEATURE,...]...
  e.g. feature_drift.py mooncake-conformance+mooncake-wire/testing mooncake-reference
  (FEATURES: what that package's own build turns on, as the wheel's build turns on mooncake-wire/testing)
"""
import subprocess
import sys


def features(args):
    done = subprocess.run(
        ["cargo", "tree", "--locked", "-e", "features", "--prefix", "none", "-f", "{p}|{f}", *args],
        capture_output=True, text=True,
    )
    if done.returncode != 0:
        sys.exit(f"feature drift: cargo tree {' '.join(args)} failed:\n{done.stderr}")
    found = {}
    for line in done.stdout.splitlines():
        if "|" not in line:
            continue
        package, feats = line.split("|", 1)
        package = package.replace(" (*)", "").strip()
        found.setdefault(package, set()).update(f for f in feats.replace("(*)", "").strip().split(",") if f)
    return found


def drift(workspace, spec):
    package, _, extra = spec.partition("+")
    args = ["-p", package, "-e", "normal,build"] + (["--features", extra] if extra else [])
    alone = features(args)
    found = [(p, sorted(workspace[p] - f), sorted(f - workspace[p])) for p, f in sorted(alone.items())
             if p in workspace and workspace[p] != f]
    for dep, only_workspace, only_alone in found:
        print(f"feature drift: {package} built alone: {dep}: only in the workspace's build {only_workspace}, "
              f"only alone {only_alone}")
    return bool(found)


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 2
    workspace = features(["--workspace"])
    drifted = [spec for spec in sys.argv[1:] if drift(workspace, spec)]
    if drifted:
        print("feature drift: built alone, these would compile the tree again; turn the features on where the "
              "package alone gets them too (see the feature pins in conformance/Cargo.toml)")
    return 1 if drifted else 0


if __name__ == "__main__":
    sys.exit(main())
