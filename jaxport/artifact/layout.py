"""Where things sit inside an artifact: member names, alignment and size limits (specs/FORMAT.md, "Container").

One rule decides whether a name may name a member or a tensor: ``is_safe_member_name``. The container writer and
reader, the manifest validator and the tensor storage all take their constants from here.
"""

from __future__ import annotations

import re

#: The first member of every artifact.
MANIFEST_NAME = "manifest.json"
#: Every member's data, and every tensor inside the weights member, starts at a multiple of this many bytes.
ALIGNMENT = 64
#: The member holding every bound tensor (see ``tensors``).
WEIGHTS_MEMBER = "weights.bin"
#: A function's JAX serialization: ``functions/NAME.jaxexport``.
PAYLOAD_NAME = re.compile(r"^functions/[A-Za-z_][A-Za-z0-9_]*\.jaxexport$")

MAX_MANIFEST_BYTES = 16 << 20
MAX_MEMBERS = 1 << 16
MAX_NAME = 1024


def payload_name(function: str) -> str:
    """The member that holds a function's JAX serialization."""
    return f"functions/{function}.jaxexport"


#: What :func:`is_safe_member_name` refuses, for messages.
UNSAFE_NAME = "absolute, an empty, '.' or '..' component, a drive, a backslash or NUL"


def is_safe_member_name(name: str) -> bool:
    """A relative ``/``-separated path with no empty, ``.`` or ``..`` component, no NUL or backslash, no drive or
    scheme prefix, at most ``MAX_NAME`` characters: a name that cannot escape a directory it is extracted to."""
    if not name or len(name) > MAX_NAME or "\0" in name or "\\" in name or name.startswith("/"):
        return False
    parts = name.split("/")
    return all(p not in ("", ".", "..") for p in parts) and ":" not in parts[0]
