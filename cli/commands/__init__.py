"""The commands of ``jaxport``: one module each, loaded only when that command runs (``group.LazyGroup``)."""

#: Command name -> (module, the one-line help ``jaxport --help`` lists it with).
COMMANDS = {
    "export": ("jaxport_cli.commands.export", "Export a JAX function into an artifact, from a YAML shape spec."),
    "inspect": ("jaxport_cli.commands.inspect", "Show what an artifact holds, without importing JAX."),
    "call": ("jaxport_cli.commands.call", "Run an artifact on real inputs, checking them first."),
    "verify": ("jaxport_cli.commands.verify", "Compare an artifact with its live function, golden outputs or XLA."),
    "diff": ("jaxport_cli.commands.diff", "Compare two artifacts; classify each difference as breaking or not."),
    "check": ("jaxport_cli.commands.check", "Check an artifact against a policy (platforms, custom calls, ...)."),
    "compile": ("jaxport_cli.commands.compile", "Compile an artifact's function into an IREE module (.vmfb)."),
    "extract": ("jaxport_cli.commands.extract", "Write parts of an artifact for other tools: weights, JAX payload, "
                                                "StableHLO."),
    "import": ("jaxport_cli.commands.import_", "Import a StableHLO module written by another producer into an "
                                               "artifact."),
    "completion": ("jaxport_cli.commands.completion", "Print the shell completion script (bash, zsh or fish)."),
    "rebind": ("jaxport_cli.commands.rebind", "Replace an artifact's bound weights without re-exporting."),
    "upgrade": ("jaxport_cli.commands.upgrade", "Re-serialize an artifact with this JAX (or for an older one), "
                                                "checked to compute the same."),
    "warmup": ("jaxport_cli.commands.warmup", "Check and compile an artifact ahead for given shapes, into the cache."),
    "sign": ("jaxport_cli.commands.sign", "Sign an artifact (OpenSSF model signing): write ARTIFACT.sig beside it."),
    "serve": ("jaxport_cli.commands.serve", "Serve artifacts over the Open Inference Protocol (v2): REST and gRPC."),
    "target": ("jaxport_cli.commands.target", "Capture this machine's GPU as a compile target, for --target "
                                              "cuda-FILE elsewhere."),
}
