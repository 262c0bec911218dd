"""``dataclass(frozen=True)`` without importing :mod:`dataclasses`, for the modules that reading a manifest imports.

``import dataclasses`` pulls in ``inspect``, ``ast``, ``dis`` and ``tokenize`` (7 ms), and each class it decorates
compiles its methods from source (0.3 - 0.6 ms), which is a sixth of what ``jaxport inspect`` takes. The modules on
that path (``dtypes``, ``dimexpr``, ``artifact.bounds``, ``artifact.calltree``, ``artifact.window.compat``,
``artifact.container``) therefore take :func:`dataclass` from here. It supports exactly what they use and refuses the
rest: ``frozen=True``; fields declared by annotations, in order, with immutable class-level defaults; a base class
of ``object``. The instances behave as the standard library's do: ``__init__`` by position or keyword, ``__repr__``
``Name(a=1, b=None)``, ``__eq__`` between instances of the same class, ``__hash__`` of the fields' tuple, and
assigning or deleting a field raises ``AttributeError``. They are not ``dataclasses.is_dataclass``. Type checkers
see the standard decorator: ``TYPE_CHECKING = False`` is how these modules guard imports for type checkers only
(``typing`` itself: 2 ms), and mypy reads a module-level constant of that name as ``typing.TYPE_CHECKING``.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's constant, without importing typing on the path that reads an artifact
if TYPE_CHECKING:
    from dataclasses import dataclass as dataclass
else:

    def dataclass(*, frozen: bool):
        """The decorator ``@dataclass(frozen=True)`` (see the module docstring)."""
        if frozen is not True:
            raise TypeError("jaxport._record.dataclass supports frozen=True only")
        return _frozen


def _frozen(cls: type) -> type:
    if cls.__bases__ != (object,):
        raise TypeError(f"{cls.__qualname__}: jaxport._record.dataclass does not support base classes")
    names = tuple(cls.__dict__.get("__annotations__", {}))
    defaults = {n: cls.__dict__[n] for n in names if n in cls.__dict__}
    for i, name in enumerate(names):
        if isinstance(defaults.get(name), (list, dict, set)):
            raise ValueError(f"mutable default {type(defaults[name])} for field {name} is not allowed")
        if name not in defaults and any(n in defaults for n in names[:i]):
            raise TypeError(f"non-default argument {name!r} follows default argument")
    qualname, count = cls.__qualname__, len(names)

    def __init__(self, *args, **kwargs):
        if len(args) == count and not kwargs:  # the usual call: every field by position
            self.__dict__.update(zip(names, args))
            return
        if len(args) > count:
            raise TypeError(f"{qualname}.__init__() takes {count + 1} positional arguments but {len(args) + 1} were "
                            f"given")
        values = dict(zip(names, args))
        for name in names[len(args):]:
            if name in kwargs:
                values[name] = kwargs.pop(name)
            elif name in defaults:
                values[name] = defaults[name]
            else:
                raise TypeError(f"{qualname}.__init__() missing 1 required argument: {name!r}")
        for name in kwargs:
            raise TypeError(f"{qualname}.__init__() got multiple values for argument {name!r}" if name in names
                            else f"{qualname}.__init__() got an unexpected keyword argument {name!r}")
        self.__dict__.update(values)

    def __repr__(self):
        return f"{type(self).__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in names)})"

    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)
        return NotImplemented

    def __hash__(self):
        return hash(tuple(getattr(self, n) for n in names))

    def __setattr__(self, name, value):
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name):
        raise AttributeError(f"cannot delete field {name!r}")

    for method in (__init__, __repr__, __eq__, __hash__, __setattr__, __delattr__):
        method.__qualname__ = f"{qualname}.{method.__name__}"
        setattr(cls, method.__name__, method)
    cls.__match_args__ = names  # type: ignore[attr-defined,misc]
    return cls
