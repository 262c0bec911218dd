"""Showing text that came from outside jaxport (manifests, file names, YAML, module text) on a terminal.

An artifact, a spec or a file name may carry characters that drive a terminal instead of being shown: ANSI and OSC
escape sequences (ESC, BEL, the C1 controls), carriage returns and backspaces that overwrite what was printed,
bidirectional overrides that reorder it, zero-width and other invisible characters that hide it, and lone
surrogates that cannot even be encoded. :func:`visible` is the one rule for all of them: every such character is
shown as its Python escape (``\\x1b``, ``\\u202e``), so what a user reads is what the text holds. Every renderer of
the command line and every error message goes through it.
"""

from __future__ import annotations

__all__ = ["closest", "human_bytes", "plural", "suggest", "visible"]

#: Characters Python calls printable that show nothing and can hide text (Unicode's default-ignorable code points
#: outside the format category, and the Hangul fillers). Everything Python calls unprintable is escaped anyway: the
#: C0 and C1 controls, DEL, the format characters (bidirectional controls, zero-width spaces and joiners, soft
#: hyphen, byte-order mark, tags), line and paragraph separators, spaces other than the ASCII space, surrogates,
#: private-use and unassigned code points.
_INVISIBLE = frozenset(
    [0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0, 0x2800]
    + list(range(0x180B, 0x1810))
    + list(range(0xFE00, 0xFE10))
    + list(range(0xE0100, 0xE01F0))
)


def _shown(ch: str) -> str:
    if ch.isprintable() and ord(ch) not in _INVISIBLE:
        return ch
    return ascii(ch)[1:-1]


def visible(text: str, *, newlines: bool = False) -> str:
    """``text`` with every character that is not shown as itself escaped (``\\x1b``, ``\\r``, ``\\u202e``).

    ``newlines`` keeps line breaks (``\\n``): for jaxport's own multi-line text, whose lines are each made visible;
    elsewhere a line break is escaped, so that a foreign string cannot start a line that looks like jaxport's.
    """
    if not isinstance(text, str):
        text = str(text)
    if newlines and "\n" in text:
        return "\n".join(visible(line) for line in text.split("\n"))
    if text.isprintable() and (text.isascii() or not any(ord(c) in _INVISIBLE for c in text)):
        return text
    return "".join(_shown(c) for c in text)


def plural(n: int, word: str, plural_form: str | None = None) -> str:
    """``n`` and ``word`` in agreement: ``1 case``, ``2 cases``, ``0 cases``, ``-1 day``; ``plural_form`` for a word
    that does not take an ``s`` (``plural(2, "entry", "entries")``)."""
    return f"{n} {word if n in (1, -1) else (plural_form or word + 's')}"


def human_bytes(n: int, *, binary: bool = False) -> str:
    """A size as people read it, the one way jaxport writes sizes in messages: ``1.5 MB`` (decimal units, one
    decimal; ``512 B`` below a kilobyte), or with ``binary`` the units memory limits and budgets are given in, to three
    significant digits (``2 GiB``, ``64 MiB``, ``1.5 KiB``)."""
    if binary:
        for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
            if n >= 1 << shift:
                return f"{n / (1 << shift):.3g} {unit}"
        return f"{n} B"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def closest(word: str, choices: list[str] | tuple[str, ...]) -> str | None:
    """The choice closest to ``word`` (a likely misspelling of it: first one that differs only in case, ``BATCH``
    for ``batch``), or None."""
    import difflib  # only for messages: not imported when a manifest is read

    folded = [c for c in choices if c.casefold() == word.casefold()]
    if folded:
        return folded[0]
    close = difflib.get_close_matches(word, list(choices), n=1)
    return close[0] if close else None


def suggest(word: str, choices: list[str] | tuple[str, ...]) -> str:
    """`` Did you mean 'X'?`` for the choice closest to ``word``, or an empty string."""
    close = closest(word, choices)
    return f" Did you mean {close!r}?" if close else ""
