"""The engine-free dispatcher of ``jaxport serve`` (``jaxport.serve.batcher``): what queues behind a running call
merges into the next, a lone request never waits for the window, a request being read is waited for up to the
window and no longer, fast calls run on the caller's thread. Outputs are compared with the function called
directly."""

from __future__ import annotations

import contextlib
import threading
import time

import numpy as np
import pytest

import jaxport
from jaxport.serve.batcher import Batcher
from jaxport.serve.batching import Batched
from tests.support import EXAMPLES


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    out = tmp_path_factory.mktemp("batcher") / "mlp.jaxport"
    return jaxport.export(f"{EXAMPLES}/mlp/model.py:predict", EXAMPLES / "mlp" / "spec.yaml", output=out).path


@pytest.fixture(scope="module")
def batched(mlp):
    b = Batched(jaxport.load(mlp), {"batch": [1, 2, 4, 8, 16, 32, 4096]})
    b.warmup()
    return b


@pytest.fixture(scope="module")
def direct(mlp):
    return jaxport.load(mlp)


def _x(rows: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, 784), dtype=np.float32)


@contextlib.contextmanager
def _arriving_elsewhere(batcher):
    """Another thread's request, arriving (being read) while the block runs."""
    started, release = threading.Event(), threading.Event()

    def arriving() -> None:
        with batcher.arrival():
            started.set()
            release.wait(30)

    t = threading.Thread(target=arriving)
    t.start()
    try:
        assert started.wait(30)
        yield
    finally:
        release.set()
        t.join(30)


def _expect(direct, x, out):
    np.testing.assert_allclose(out["output"], np.asarray(direct(x)), rtol=1e-5, atol=1e-6)


def test_what_queues_behind_a_running_call_merges_into_the_next(batched, direct):
    batcher = Batcher(batched, merge=True, window_ms=2)
    try:
        big = _x(4096, 1)  # one long call occupies the worker
        small = [_x(1, 10 + i) for i in range(10)]
        futures = [batcher.submit(batched.admit({"x": big}))]
        futures += [batcher.submit(batched.admit({"x": x})) for x in small]
        outs = [f.result(timeout=120) for f in futures]
        for x, out in zip([big, *small], outs):
            _expect(direct, x, out)
        assert batcher.waits.per_call == {1: 1, 10: 1}
        assert batcher.waits.requests == 11 and batcher.waits.calls == 2
    finally:
        batcher.close()


def test_merging_stops_at_the_most_rows_and_at_other_shapes(batched, direct, mlp):
    batcher = Batcher(batched, merge=True, max_rows=8, window_ms=2)
    try:
        big = _x(4096, 1)
        small = [_x(3, 20 + i) for i in range(5)]  # 3 + 3 = 6 fit 8 rows; a third would not
        futures = [batcher.submit(batched.admit({"x": big}))] + [batcher.submit(batched.admit({"x": x}))
                                                                   for x in small]
        for x, f in zip([big, *small], futures):
            _expect(direct, x, f.result(timeout=120))
        assert batcher.waits.per_call == {1: 2, 2: 2}
    finally:
        batcher.close()


def test_a_lone_request_never_waits_for_the_window(batched, direct):
    batcher = Batcher(batched, merge=True, window_ms=5000)
    try:
        x = _x(2, 3)
        start = time.perf_counter()
        _expect(direct, x, batcher(batched.admit({"x": x})))
        assert time.perf_counter() - start < 2.5  # the window is 5 s
    finally:
        batcher.close()


def test_a_request_being_read_is_waited_for_up_to_the_window(batched, direct):
    batcher = Batcher(batched, merge=True, window_ms=3000)
    try:
        x1, x2 = _x(1, 1), _x(1, 2)
        second: dict[str, object] = {}
        reading = threading.Event()

        def arriving() -> None:
            with batcher.arrival():  # as a transport counts a request while it decodes it
                reading.set()
                time.sleep(0.3)
                second["future"] = batcher.submit(batched.admit({"x": x2}))

        t = threading.Thread(target=arriving)
        t.start()
        assert reading.wait(30)
        start = time.perf_counter()
        first = batcher.submit(batched.admit({"x": x1}))
        _expect(direct, x1, first.result(timeout=60))
        waited = time.perf_counter() - start
        t.join(30)
        _expect(direct, x2, second["future"].result(timeout=60))  # type: ignore[attr-defined]
        assert batcher.waits.per_call == {2: 1}  # the second joined the first's call
        assert 0.1 < waited < 2.5, waited

        # an arrival that never submits (a bad request) holds a queued one for the window, no longer
        batcher2 = Batcher(batched, merge=True, window_ms=400)
        try:
            with _arriving_elsewhere(batcher2):
                start = time.perf_counter()
                _expect(direct, x1, batcher2.submit(batched.admit({"x": x1})).result(timeout=60))
                assert 0.35 < time.perf_counter() - start < 3.0
        finally:
            batcher2.close()
    finally:
        batcher.close()


def test_fast_calls_with_nothing_waiting_run_on_the_callers_thread(batched, direct):
    slow = Batcher(batched, merge=True, window_ms=2, inline_seconds=0)  # no call is that fast
    try:
        x = _x(1, 5)
        for _ in range(3):
            _expect(direct, x, slow(batched.admit({"x": x})))
        assert slow.waits.inline == 0 and slow.waits.calls == 3
    finally:
        slow.close()
    batcher = Batcher(batched, merge=True, window_ms=2, inline_seconds=60)  # every call is that fast
    try:
        x = _x(1, 5)
        admitted = batched.admit({"x": x})
        assert batcher.inline(admitted) is None  # no call of this bucket measured yet: the worker runs it
        _expect(direct, x, batcher.submit(admitted).result(timeout=60))
        assert batcher.inline(admitted) is None  # the first call pays one-time costs: not a measure
        _expect(direct, x, batcher.submit(admitted).result(timeout=60))
        inline = batcher.inline(admitted)
        assert inline is not None and batcher.waits.inline == 1
        _expect(direct, x, inline)
        with _arriving_elsewhere(batcher):  # another request arriving: the worker runs this one, so they may merge
            assert batcher.inline(batched.admit({"x": x})) is None
    finally:
        batcher.close()


def test_without_merging_every_request_is_its_own_call(batched, direct):
    batcher = Batcher(batched, merge=False)
    try:
        xs = [_x(4096, 1)] + [_x(1, 30 + i) for i in range(4)]
        futures = [batcher.submit(batched.admit({"x": x})) for x in xs]
        for x, f in zip(xs, futures):
            _expect(direct, x, f.result(timeout=120))
        assert batcher.waits.per_call == {1: 5}
    finally:
        batcher.close()


def test_close_lets_queued_requests_finish(batched, direct):
    batcher = Batcher(batched, merge=True, window_ms=2)
    xs = [_x(4096, 1), _x(1, 2)]
    futures = [batcher.submit(batched.admit({"x": x})) for x in xs]
    batcher.close(timeout=120)
    for x, f in zip(xs, futures):
        _expect(direct, x, f.result(timeout=0))
    with pytest.raises(RuntimeError, match="the batcher is closed"):
        batcher.submit(batched.admit({"x": xs[1]}))


def test_merged_calls_never_wait_for_a_compile_and_what_they_need_compiles_meanwhile(mlp, direct):
    """Only buckets 1, 2 and 4096 are compiled: ten one-row requests queued behind a running call merge two at a
    time (never into 4096 rows, never waiting for a compile) while the bucket of all ten (16) compiles on the
    compile thread; the next ten merge into one call on it."""
    b = Batched(jaxport.load(mlp), {"batch": [1, 2, 4, 8, 16, 4096]})
    b.warmup(buckets=[{"batch": 1}, {"batch": 2}, {"batch": 4096}])
    batcher = Batcher(b, merge=True, window_ms=2)
    try:
        for round_ in range(2):
            if round_:
                deadline = time.monotonic() + 120  # the bucket of ten rows, compiled meanwhile
                while not b.compiled.has((16,)) and time.monotonic() < deadline:
                    time.sleep(0.05)
            big = _x(4096, 1)  # one long call occupies the worker while the others queue
            small = [_x(1, 40 + i) for i in range(10)]
            futures = [batcher.submit(b.admit({"x": big}))] + [batcher.submit(b.admit({"x": x})) for x in small]
            for x, f in zip([big, *small], futures):
                _expect(direct, x, f.result(timeout=120))
            if not round_:
                assert b.stats["batch=2"].calls == 5 and b.stats["batch=4096"].calls == 1, b.stats
        assert batcher.waits.per_call == {1: 2, 2: 5, 10: 1}, batcher.waits.per_call
        # the buckets of what was queued at each merge (10, 8, 6 and 4 rows), each compiled once, meanwhile
        assert b.stats["batch=16"].calls == 1 and b.compiled.counts["request"] == 3
        assert sorted(k["batch"] for k in b.compiled.held) == [1, 2, 4, 8, 16, 4096]
    finally:
        batcher.close()
