"""What a required signature costs a command: `jaxport call` and `jaxport inspect --signature-key` with and without.

    python benchmarks/bench_signature.py [--quick | --repeats N]

Goal (issue 54, item 6): a required signature costs under 100 ms per command beyond reading the artifact. The MLP of
examples/mlp is exported and signed with a fresh P-256 key; its cache directory is warmed up once (the program's
executable shipped with `warmup --target cpu` and vouched for with `--sign`, so that both calls fetch it and start
no check: what a server with a signed cache does). Contenders, interleaved in fresh processes:

- `call` and `call --require-signature KEY` on the same inputs and cache;
- `inspect` and `inspect --signature-key KEY` (no JAX: the signature check's own cost is all the difference);
- `python -c "import model_signing.verifying"`, what the check imported before this round, for scale.

The difference of the medians is the signature's cost.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

GOAL_MS = 100


def main() -> None:
    args = common.parse_args(__doc__.splitlines()[0])
    jaxport = common.jaxport_command()
    common.print_machine()
    with tempfile.TemporaryDirectory(prefix="bench-signature-") as d:
        tmp = Path(d)
        art, key, pub, x, cache = tmp / "mlp.jaxport", tmp / "k.pem", tmp / "k.pub", tmp / "x.npy", tmp / "cache"
        subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(key)], check=True)
        subprocess.run(["openssl", "ec", "-in", str(key), "-pubout", "-out", str(pub)], check=True,
                       stderr=subprocess.DEVNULL)
        common.run_once([jaxport, "export", str(common.REPO / "examples/mlp/model.py:predict"), "--shapes",
                         str(common.REPO / "examples/mlp/spec.yaml"), "-o", str(art)])
        common.run_once([jaxport, "sign", str(art), "--key", str(key)])
        common.run_once([sys.executable, "-c", f"import numpy as np; np.save({str(x)!r}, np.ones((4, 784), "
                                               f"np.float32))"])
        common.run_once([jaxport, "warmup", str(art), "--target", "cpu", "--dim", "batch=4", "--cache-dir",
                         str(cache), "--sign", str(key)])
        call = [jaxport, "call", str(art), "--inputs", str(x), "--cache-dir", str(cache)]
        common.run_once([*call, "--require-signature", str(pub)])  # leaves the check's verdict
        common.run_once([jaxport, "sign", str(art), "--key", str(key), "--cache-dir", str(cache)])
        contenders = [common.Contender("call", call),
                      common.Contender("call --require-signature", [*call, "--require-signature", str(pub)]),
                      common.Contender("inspect", [jaxport, "inspect", str(art)]),
                      common.Contender("inspect --signature-key", [jaxport, "inspect", str(art), "--signature-key",
                                                                   str(pub)]),
                      common.Contender("import model_signing.verifying",
                                       [sys.executable, "-c", "import model_signing.verifying"])]
        common.interleave(contenders, args.repeats)
    by = {c.label: c for c in contenders}
    rows = [[c.label, f"{c.median * 1e3:.0f} ms", f"{c.best * 1e3:.0f} ms"] for c in contenders]
    print(common.table(["command", "median", "best"], rows))
    for plain, signed in (("call", "call --require-signature"), ("inspect", "inspect --signature-key")):
        cost = (by[signed].median - by[plain].median) * 1e3
        verdict = "met" if cost < GOAL_MS else "NOT met"
        print(f"{signed}: {cost:+.0f} ms against {plain} (goal < {GOAL_MS} ms: {verdict})")


if __name__ == "__main__":
    main()
