"""The spec language (``specs/SPEC.md``): a YAML document, or its Python forms, describing a function's arguments
with symbolic shapes.

``parse`` reads a spec file into the records of ``model`` (a ``ShapeSpec``); ``values`` holds the checks that other
readers share (platforms, artifact and function names, input ranges: the manifest reader uses them too); ``like``
reads the ``like:`` argument and ``outputs`` the output names; ``build`` gives the Python forms of a spec (the
``jaxport.Spec`` builder, ``jaxport.like``, a dict, YAML text); ``tree`` is the one walk over a function's argument
trees. No JAX.

Importing the package imports none of its modules: each name below loads its module when first read (PEP 562), so
that the manifest reader gets ``values`` without the parser and YAML.
"""

__all__ = [
    "LIKE_KEYS", "MAX_DEPTH", "MAX_DIMENSION", "MAX_NODES", "MAX_RANK", "MAX_SPEC_BYTES", "MAX_VJP_ORDER", "PLATFORMS",
    "SPEC_DOCUMENT", "SPEC_VERSIONS", "ArrayLeaf", "BindLeaf", "ConstraintSpec", "DimVar", "FunctionSpec", "Like",
    "LikeLeaf", "ShapeSpec", "Spec", "StaticLeaf", "Where", "as_shape_spec", "check_artifact_name",
    "check_function_name", "check_platform", "dimension_range", "input_range", "is_yaml_text", "like_values",
    "load_spec", "parse_like", "parse_range", "parse_spec", "suggest",
]

#: Public name -> the module of this package that defines it.
_HOMES = {
    **dict.fromkeys(("SPEC_VERSIONS", "MAX_SPEC_BYTES", "MAX_DEPTH", "MAX_NODES", "MAX_DIMENSION", "MAX_RANK",
                     "MAX_VJP_ORDER", "SPEC_DOCUMENT", "parse_spec", "load_spec"), "parse"),
    **dict.fromkeys(("Where", "ArrayLeaf", "StaticLeaf", "BindLeaf", "DimVar", "ConstraintSpec", "FunctionSpec",
                     "ShapeSpec"), "model"),
    **dict.fromkeys(("PLATFORMS", "suggest", "parse_range", "dimension_range", "input_range", "check_platform",
                     "check_function_name", "check_artifact_name"), "values"),
    **dict.fromkeys(("LIKE_KEYS", "LikeLeaf", "parse_like"), "like"),
    **dict.fromkeys(("Spec", "Like", "as_shape_spec", "like_values", "is_yaml_text"), "build"),
}

TYPE_CHECKING = False  # typing's constant, without importing typing on the path that reads an artifact
if TYPE_CHECKING:
    from .build import Like, Spec, as_shape_spec, is_yaml_text, like_values
    from .like import LIKE_KEYS, LikeLeaf, parse_like
    from .model import ArrayLeaf, BindLeaf, ConstraintSpec, DimVar, FunctionSpec, ShapeSpec, StaticLeaf, Where
    from .parse import (
        MAX_DEPTH,
        MAX_DIMENSION,
        MAX_NODES,
        MAX_RANK,
        MAX_SPEC_BYTES,
        MAX_VJP_ORDER,
        SPEC_DOCUMENT,
        SPEC_VERSIONS,
        load_spec,
        parse_spec,
    )
    from .values import (
        PLATFORMS,
        check_artifact_name,
        check_function_name,
        check_platform,
        dimension_range,
        input_range,
        parse_range,
        suggest,
    )


def __getattr__(name: str) -> object:
    """``jaxport.spec.parse_spec`` (and every name of ``__all__``) from the module that defines it, imported now."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
