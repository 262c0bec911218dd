"""``jaxport sign``: an artifact's model-signing signature, written beside it (no JAX)."""

from __future__ import annotations

import click

from .. import errors, render
from ..options import debug_option, json_option, signature_path_option


@click.command("sign")
@click.argument("artifact", type=click.Path())
@click.option("--key", "key", required=True, type=click.Path(), metavar="PRIVATE.pem",
              help="The elliptic-curve private key to sign with (PEM; P-256, P-384 or P-521).")
@signature_path_option("Where to write the signature bundle (default: ARTIFACT.sig beside the artifact); one "
                       "there is replaced.", written=True)
@click.option("--certificate", "certificate", type=click.Path(), metavar="CERT",
              help="Sign with the PKI method: the key's certificate (PEM), carried in the bundle with its chain.")
@click.option("--certificate-chain", "certificate_chain", multiple=True, type=click.Path(), metavar="CHAIN",
              help="With --certificate: the intermediate and root certificates (PEM); repeatable.")
@click.option("--password-env", "password_env", metavar="VAR",
              help="Read the private key's password from environment variable VAR (never from the command line).")
@json_option
@debug_option
def command(artifact, key, signature_path, certificate, certificate_chain, password_env, as_json, debug):
    """Sign an artifact (the OpenSSF model-signing format): write ARTIFACT.sig beside it.

    The bundle is what 'model_signing sign key' writes (a sigstore bundle: a DSSE envelope over an in-toto statement
    of the file's name and sha256), and 'model_signing verify key' accepts it; 'jaxport check --signature-key',
    and --require-signature of call, serve, warmup, verify and rebind, verify it before the artifact runs. The
    artifact is checked (every member's sha256) and left byte for byte as it was. Needs jaxport[sign].

    \b
    Examples:
      jaxport sign mlp.jaxport --key ci-signing.pem
      jaxport sign mlp.jaxport --key ci-signing.pem --json
    """

    def body():
        import os

        import jaxport

        password = None
        if password_env is not None:
            password = os.environ.get(password_env)
            if password is None:
                raise click.UsageError(f"--password-env {password_env}: the environment variable is not set.")
        if certificate_chain and certificate is None:
            raise click.UsageError("--certificate-chain needs --certificate CERT, the signing key's certificate.")
        signed = jaxport.sign(artifact, key, signature=signature_path, certificate=certificate,
                              certificate_chain=certificate_chain, password=password)
        if as_json:
            render.print_json(signed.as_dict())
            return
        kid = f" {signed.key_id[:16]}" if signed.key_id else ""
        render.stdout().print(
            f"Signed {render.plain(str(signed.artifact))}: {render.plain(str(signed.signature))} ({signed.method}"
            f"{kid}; sha256 {signed.sha256[:16]}...); the artifact's bytes are unchanged. Check it with "
            f"'jaxport check {render.plain(str(signed.artifact))} --signature-key PUBLIC.pem'.",
            markup=False, highlight=False, soft_wrap=True)

    errors.run(body, debug=debug, as_json=as_json)
