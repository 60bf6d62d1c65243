"""What the hand-picked cases need to know about a message class: its fields, their types and defaults, and a
few reference values of every type (typical, smallest, largest, minimal)."""
import enum
import types
import typing

import msgspec

NoneType = type(None)
MAX_INT = 2 ** 64 - 1
MIN_INT = -2 ** 63
MAX_STR = "\u00ff" * 40


class Field:
    def __init__(self, info):
        self.name = info.name
        self.type = info.type
        if info.default is not msgspec.NODEFAULT:
            self.has_default, self.default = True, info.default
        elif info.default_factory is not msgspec.NODEFAULT:
            self.has_default, self.default = True, info.default_factory()
        else:
            self.has_default, self.default = False, None

    @property
    def required(self):
        return not self.has_default

    @property
    def inner(self):
        """The type without `| None`."""
        return non_none(self.type)


def fields(cls):
    return [Field(f) for f in msgspec.structs.fields(cls)]


def is_union(t):
    return typing.get_origin(t) in (typing.Union, types.UnionType)


def is_optional(t):
    return is_union(t) and NoneType in typing.get_args(t)


def non_none(t):
    if is_union(t):
        rest = [a for a in typing.get_args(t) if a is not NoneType]
        return rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]
    return t


def is_enum(t):
    return isinstance(t, type) and issubclass(t, enum.Enum)


def origin(t):
    return typing.get_origin(t)


def args(t):
    return typing.get_args(t)


def kind(t):
    """int | str | enum | list | tuple | dict"""
    t = non_none(t)
    if t is int:
        return "int"
    if t is str:
        return "str"
    if is_enum(t):
        return "enum"
    o = origin(t)
    if o is list:
        return "list"
    if o is tuple:
        return "tuple"
    if o is dict:
        return "dict"
    raise TypeError(f"unsupported field type {t!r}")


def typical(t):
    t = non_none(t)
    k = kind(t)
    if k == "int":
        return 7
    if k == "str":
        return "x"
    if k == "enum":
        return list(t)[-1]
    if k == "list":
        return [typical(args(t)[0])]
    if k == "tuple":
        return tuple(typical(a) for a in args(t))
    return {"req-typical": typical(args(t)[1])}


def largest(t):
    t = non_none(t)
    k = kind(t)
    if k == "int":
        return MAX_INT
    if k == "str":
        return MAX_STR
    if k == "enum":
        return list(t)[-1]
    if k == "list":
        return [largest(args(t)[0])]
    if k == "tuple":
        return tuple(largest(a) for a in args(t))
    return {"req-max": largest(args(t)[1])}


def smallest(t):
    t = non_none(t)
    k = kind(t)
    if k == "int":
        return MIN_INT
    if k == "str":
        return ""
    if k == "enum":
        return list(t)[0]
    if k == "list":
        return [smallest(args(t)[0])]
    if k == "tuple":
        return tuple(smallest(a) for a in args(t))
    return {"req-min": smallest(args(t)[1])}


def zero(t):
    """The emptiest value of a type (what a minimal message carries in a required field)."""
    t = non_none(t)
    k = kind(t)
    if k == "int":
        return 0
    if k == "str":
        return ""
    if k == "enum":
        return list(t)[0]
    if k == "list":
        return []
    if k == "tuple":
        return tuple(zero(a) for a in args(t))
    return {}


def minimal_values(fs):
    return {f.name: (f.default if f.has_default else zero(f.type)) for f in fs}


def all_set_values(fs):
    return {f.name: typical(f.type) for f in fs}
