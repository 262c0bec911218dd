"""The served models: :class:`JaxportModel`, one version of one artifact's function as a kserve ``Model`` over a
:class:`batching.Batched` (a request checked once, run on the event loop or the worker of its ``batcher``), and
:class:`Registry`, the models by name and version. The REST routes (``rest``), the gRPC servicer (``grpc_service``)
and the metrics (``metrics``) read them; ``kserve_server`` serves them (see its docstring). Needs the optional extra
``jaxport[serve]`` (kserve), as every module that imports ``kserve_imports``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import InputError, JaxportError
from ..batcher import Batcher
from ..batching import Batched
from . import oip
from .kserve_imports import PREDICT_HIST_TIME, InferenceError, InvalidInput, Model, ModelNotFound, get_labels


class JaxportModel(Model):
    """One version of one artifact's function, served (see the docstrings of this module and ``kserve_server``)."""

    def __init__(self, name: str, version: str, batched: Batched, *, window_ms: float = 0.0,
                 max_rows: int | None = None):
        super().__init__(name)
        self.version = version
        self.batched = batched
        f = batched.function_record
        self.inputs = [oip.Tensor.of(i, "input") for i in f.inputs]  # UsageError for a dtype OIP lacks
        self.outputs = [oip.Tensor.of(o, "output") for o in f.outputs]
        self.batcher = Batcher(batched, merge=window_ms > 0, max_rows=max_rows, window_ms=window_ms,
                               name=f"jaxport-{name}")
        self.max_rows = self.batcher.max_rows
        self._latency = PREDICT_HIST_TIME.labels(**get_labels(name))
        self.ready = True  # its warm-up ran before the model was made

    @property
    def batching(self) -> bool:
        return self.batcher.merge

    def metadata(self, versions: Sequence[str]) -> dict[str, Any]:
        return oip.model(self.batched.function_record, self.name, versions, self.batched.loaded.function,
                         self.batched.describe())

    def get_input_types(self) -> list[dict[str, Any]]:
        return [t.types() for t in self.inputs]

    def get_output_types(self) -> list[dict[str, Any]]:
        return [t.types() for t in self.outputs]

    async def outputs_of(self, arrays: Mapping[str, Any]) -> dict[str, Any]:
        """The outputs by name of one request's input arrays: checked once, run on the event loop when that is
        fastest, else on the worker (``batcher``), merged with others when batching. The request's errors are
        kserve's ``InvalidInput`` (400), a failed call ``InferenceError`` (500)."""
        start = time.perf_counter()
        try:
            admitted = self.batched.admit(arrays)  # the one check of this request
            compiling = self.batched.pending(admitted)
            if compiling is not None:  # a size not compiled yet: compiled on the compile thread, once
                await asyncio.wrap_future(compiling)
            if self.batcher.merge:
                # let the handlers of requests already read reach their arrival first: with others arriving, this
                # one goes to the worker, which merges them (inline, each would run alone)
                await asyncio.sleep(0)
            outputs = self.batcher.inline(admitted)
            if outputs is None:
                outputs = await asyncio.wrap_future(self.batcher.submit(admitted))
        except InputError as e:
            raise InvalidInput(str(e)) from None
        except JaxportError as e:
            raise InferenceError(str(e)) from None
        self._latency.observe(time.perf_counter() - start)
        return outputs

    async def predict(self, payload: Any, headers: Mapping[str, str] | None = None,
                      response_headers: Any = None) -> Any:
        """kserve's entry point, which only its own routes reach (the protocol's v1): refused. The v2 routes decode,
        run (:meth:`outputs_of`) and encode here (``rest``, ``grpc_service``)."""
        raise InvalidInput("jaxport serves the Open Inference Protocol (v2): POST /v2/models/NAME/infer.")


def _version_key(version: str) -> tuple[int, Any]:
    return (0, int(version)) if version.isdigit() else (1, version)


class Registry:
    """The served models by name and version; an unversioned name means its highest version."""

    def __init__(self, models: Sequence[JaxportModel]):
        self.models: dict[tuple[str, str], JaxportModel] = {}
        for m in models:
            if (m.name, m.version) in self.models:
                raise InputError(f"model {m.name!r} version {m.version} is given twice; give each artifact its own "
                                 f"NAME or version (NAME@VERSION=ARTIFACT).")
            self.models[(m.name, m.version)] = m
        self.latest: dict[str, JaxportModel] = {}
        for (name, _), m in sorted(self.models.items(), key=lambda kv: (kv[0][0], _version_key(kv[0][1]))):
            self.latest[name] = m

    def versions(self, name: str) -> list[str]:
        return sorted((v for n, v in self.models if n == name), key=_version_key)

    def get(self, name: str, version: str | None = None) -> JaxportModel:
        model = self.latest.get(name) if not version else self.models.get((name, version))
        if model is None:  # the names shortened: gRPC carries the message in its metadata (8 KiB at most)
            raise ModelNotFound(f"{oip.shorten(name)} version {oip.shorten(version)}" if version else oip.shorten(name))
        return model
