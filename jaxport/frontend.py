"""What a front end of the library (the command line, a service that wraps it) shares with it beyond the API:
the one rule for showing foreign text, and the one rule that a command's outputs never replace its inputs (a front end
notes the files its options name with ``note_input``, as jaxport notes each file it opens).

The implementations live in the private foundation modules ``_text`` and ``_fsio``, which every library module
uses; a front end imports them from here, by these public names.
"""

from __future__ import annotations

from ._fsio import check_output, command_inputs, note_input
from ._text import plural, visible

__all__ = ["check_output", "command_inputs", "note_input", "plural", "visible"]
