"""Import shims for releases older than the shared environment. Filled in per need; see README.md."""


def install():
    pass
