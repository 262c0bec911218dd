"""The jaxport error hierarchy.

Every failure a user can act on is a :class:`JaxportError`. The library raises these; only the command line
renders them (one line, no traceback) and maps each class to its exit code, in ``jaxport_cli.errors``. Any other
exception escaping jaxport is a bug.
"""

from __future__ import annotations


class JaxportError(Exception):
    """Base class of the errors a user can act on."""

    #: One word naming the kind of error, shown before the message and in ``--json`` output.
    kind = "error"


class SpecError(JaxportError):
    """The YAML shape spec is malformed or does not fit the function."""

    kind = "spec"


class EntrypointError(JaxportError):
    """The ``module:attribute`` entry point cannot be loaded or is not callable."""

    kind = "entrypoint"


class ExportError(JaxportError):
    """JAX could not lower or serialize the function (host callbacks, unsupported shapes, ...)."""

    kind = "export"


class PolicyError(JaxportError):
    """The program uses something the policy does not allow (custom-call targets, platforms)."""

    kind = "policy"


class FormatError(JaxportError):
    """The file is not a jaxport artifact, is damaged, or uses a format version this release cannot read."""

    kind = "format"


class IntegrityError(FormatError):
    """A member's size or sha256 digest does not match the manifest."""

    kind = "integrity"


class InputError(JaxportError):
    """An input file or value does not match what the artifact accepts."""

    kind = "input"


class PlatformError(JaxportError):
    """The artifact was not exported for the platform it is asked to run on."""

    kind = "platform"


class MissingExtra(PlatformError, ImportError):
    """An optional extra a feature needs is not installed (``jaxport.beam`` without ``jaxport[beam]``): a platform
    error (exit 10) that names the ``pip install`` to run, and an ``ImportError`` too, so that code guarding an
    optional import with ``except ImportError`` keeps working."""

    def __init__(self, feature: str, extra: str, packages: str, cause: BaseException | str):
        super().__init__(f"{feature} needs the optional extra jaxport[{extra}] ({packages}), which is not installed "
                         f"({cause}): pip install 'jaxport[{extra}]'.")


class UsageError(JaxportError):
    """A request that does not fit the artifact, such as an unknown function name."""

    kind = "usage"


class OutputError(JaxportError):
    """An output file cannot be written (permissions, missing directory, full disk)."""

    kind = "output"


class CrashError(JaxportError):
    """An isolated child process died: a signal in native code, or its memory or time limit (``--isolate``)."""

    kind = "crash"


class VerificationError(JaxportError):
    """``jaxport verify``: the artifact and the live function disagree, or the spec does not describe the artifact."""

    kind = "verification"


class DiffError(JaxportError):
    """``jaxport diff``: the artifacts differ at the level chosen with ``--fail-on``."""

    kind = "diff"


class PolicyViolation(JaxportError):
    """``jaxport check``: the artifact breaks one or more rules of the policy."""

    kind = "violation"


class SignatureError(JaxportError):
    """A signature an artifact must have is missing or unreadable, by a signer not trusted, or not of this file
    (``jaxport check --signature-key``, ``--require-signature``, ``jaxport.load(require_signature=...)``)."""

    kind = "signature"


class PolicyFileError(UsageError):
    """The policy file of ``jaxport check`` is malformed (YAML, unknown keys, wrong types)."""

    kind = "policy-file"
