"""The engine-free dispatcher of ``jaxport serve`` (``jaxport.serve.batcher``): what queues behind a running call
merges into the next, a lone request never waits for the window, a request being read is waited for up to the
window and no longer, fast calls run on the caller's thread. Outputs are compared with the function called
directly."""

from __future__ import annotations

import contextlib
import re
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


def test_merged_calls_never_wait_for_a_compile_and_what_they_need_compiles_meanwhile(mlp, direct, monkeypatch):
    """Only buckets 1, 2 and 4096 are compiled: ten one-row requests queued behind a running call merge two at a
    time (never into 4096 rows, never waiting for a compile) while the buckets of what was queued at each merge
    compile on the compile thread; the next ten merge into one call on the bucket of ten (16).

    What the test must not leave to timing is held in place: the long call starts only once the ten are queued (so
    the first merge sees all ten, however slowly this thread submits), and the compile thread waits until the first
    round is answered (``COMPILING``, the lock every compile takes: so a compile that finishes early, as on a loaded
    machine, cannot hand a merge a larger bucket)."""
    from jaxport.serve.compiled import COMPILING

    b = Batched(jaxport.load(mlp), {"batch": [1, 2, 4, 8, 16, 4096]})
    b.warmup(buckets=[{"batch": 1}, {"batch": 2}, {"batch": 4096}])
    queued = threading.Event()
    run = b.run

    def held_until_queued(requests):
        if requests[0].rows == 4096:  # the long call: the ten wait behind it, all of them
            assert queued.wait(60)
        return run(requests)

    monkeypatch.setattr(b, "run", held_until_queued)
    batcher = Batcher(b, merge=True, window_ms=2)
    try:
        for round_ in range(2):
            queued.clear()
            if round_:
                deadline = time.monotonic() + 120  # the buckets asked for meanwhile: 16, 8 and 4
                while not all(b.compiled.has((n,)) for n in (16, 8, 4)) and time.monotonic() < deadline:
                    time.sleep(0.05)
            big = _x(4096, 1)  # one long call occupies the worker while the others queue
            small = [_x(1, 40 + i) for i in range(10)]
            with COMPILING if not round_ else contextlib.nullcontext():
                futures = [batcher.submit(b.admit({"x": big}))] + [batcher.submit(b.admit({"x": x})) for x in small]
                queued.set()
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


@pytest.mark.parametrize(("window", "shown"), [(float("inf"), "inf"), (float("nan"), "nan"), (1e300, "1e+300"),
                                               (-1.0, "-1.0"), (60_001, "60001")])
def test_a_window_that_is_no_number_in_its_range_is_refused(batched, window, shown):
    """The window is a finite number of milliseconds, 0 to a minute, as on the command line, refused before the
    worker starts (issue 54: a window of inf killed the batching thread and every request hung; NaN turned batching
    off)."""
    from jaxport.errors import UsageError

    with pytest.raises(UsageError, match=re.escape(f"window_ms={shown}: give a number from 0 to 60000.")):
        Batcher(batched, merge=True, window_ms=window)


def test_a_failed_dispatch_answers_what_it_held_and_the_worker_goes_on(batched, direct, monkeypatch):
    """A failure of the worker's own dispatch (here: choosing what merges) answers the request it held with that
    failure, says so once, and the worker takes the next request: none is left waiting."""
    merge_rows, failures, lines = batched.merge_rows, [RuntimeError("boom")], []

    def failing_once(*args, **kwargs):
        if failures:
            raise failures.pop()
        return merge_rows(*args, **kwargs)

    monkeypatch.setattr(batched, "merge_rows", failing_once)
    batcher = Batcher(batched, merge=True, window_ms=2, on_failure=lines.append)
    try:
        with pytest.raises(RuntimeError) as failed:
            batcher.submit(batched.admit({"x": _x(1, 70)})).result(timeout=60)
        assert str(failed.value) == ("the batching worker of jaxport failed (RuntimeError: boom) before this request "
                                     "was answered; it goes on with the next requests: send this one again.")
        assert lines == ["the batching worker of jaxport failed (RuntimeError: boom); the 1 request it held was "
                         "answered with that error, and it goes on with the next ones"]
        x = _x(3, 71)
        _expect(direct, x, batcher.submit(batched.admit({"x": x})).result(timeout=60))
        assert batcher.unanswered() == 0
    finally:
        batcher.close()


def test_unanswered_counts_the_requests_held_without_an_answer(batched, direct, monkeypatch):
    """While a call runs: it and what waits behind it, a request its transport gave up on (cancelled) included,
    until the worker has answered or dropped each; what a server that stops says of the requests in flight."""
    release, run = threading.Event(), batched.run

    def held(requests):
        assert release.wait(60)
        return run(requests)

    monkeypatch.setattr(batched, "run", held)
    batcher = Batcher(batched, merge=False)
    try:
        first = batcher.submit(batched.admit({"x": _x(1, 80)}))
        second = batcher.submit(batched.admit({"x": _x(1, 81)}))
        assert second.cancel()  # queued behind the held call: the transport gave up on it
        assert batcher.unanswered() == 2
        release.set()
        first.result(timeout=60)
        deadline = time.monotonic() + 60
        while batcher.unanswered() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert batcher.unanswered() == 0
    finally:
        release.set()
        batcher.close()
