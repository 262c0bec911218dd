"""``jaxport sign``: an artifact's model-signing signature, written beside it (no JAX)."""

from __future__ import annotations

import click

from .. import errors, render
from ..options import debug_option, json_option, password_env_option, password_from, signature_path_option


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
@password_env_option()
@click.option("--cache-dir", "cache_dir", type=click.Path(), metavar="DIR",
              help="Instead of the artifact, vouch for what the cache directory DIR holds of it (its shipped "
                   "executables, check and padding verdicts, as warmup left them): a vouch file there, signed with "
                   "--key, lets --require-signature use them (without one they are ignored and the work is done "
                   "again).")
@json_option
@debug_option
def command(artifact, key, signature_path, certificate, certificate_chain, password_env, cache_dir, as_json, debug):
    """Sign an artifact (the OpenSSF model-signing format): write ARTIFACT.sig beside it.

    The bundle is what 'model_signing sign key' writes (a sigstore bundle: a DSSE envelope over an in-toto statement
    of the file's name and sha256), and 'model_signing verify key' accepts it; 'jaxport check --signature-key',
    and --require-signature of call, serve, warmup, verify and rebind, verify it before the artifact runs. The
    artifact is checked (every member's sha256) and left byte for byte as it was. Needs jaxport[sign].

    With --cache-dir DIR, vouch instead for the entries of the cache directory DIR that belong to the artifact
    (what 'jaxport warmup --sign' does after it fills a cache): under a required signature nothing from a cache
    directory runs unless the signer vouched for it.

    \b
    Examples:
      jaxport sign mlp.jaxport --key ci-signing.pem
      jaxport sign mlp.jaxport --key ci-signing.pem --json
      jaxport sign mlp.jaxport --key ci-signing.pem --cache-dir build/shipped
    """

    def body():
        import jaxport

        password = password_from(password_env)
        if cache_dir is not None:
            if certificate is not None or certificate_chain or signature_path is not None:
                raise click.UsageError("--cache-dir vouches with a key alone: leave out --certificate, "
                                       "--certificate-chain and --signature.")
            render_vouch(jaxport.vouch_cache(artifact, key, cache_dir, password=password), artifact, as_json)
            return
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


def render_vouch(vouched, artifact, as_json):
    """What a vouch for a cache directory's entries says: its file, the key and the entries by kind."""
    if as_json:
        render.print_json({"artifact": str(artifact), **vouched.to_json()})
        return
    kinds = {}
    for e in vouched.entries:
        kinds[e.kind] = kinds.get(e.kind, 0) + 1
    counted = ", ".join(f"{n} {kind}{'s' if n != 1 and not kind.endswith('s') else ''}" for kind, n in kinds.items())
    of = f" of {render.plain(str(artifact))}" if artifact is not None else ""
    render.stdout().print(
        f"Vouched for {len(vouched.entries)} cache entr{'y' if len(vouched.entries) == 1 else 'ies'}{of} "
        f"({counted}): {render.plain(str(vouched.path))} (key {vouched.key_id[:16]}). --require-signature with its "
        f"public key uses them.", markup=False, highlight=False, soft_wrap=True)
