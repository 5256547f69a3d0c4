"""A local gRPC server on 127.0.0.1 for the gRPC adapter's tests (tests/test_grpc.py).

Generic handlers on protobuf's well-known ``Struct`` messages (no proto to compile): a Qdrant-named
service, ``qdrant.Points`` (``Search``: unary, ``Upsert``: unary write), and ``demo.Items`` with the other
shapes (``ListItems``: server stream, ``Upload``: client stream, ``Chat``: bidirectional). A ``Search``
for ``"missing"`` ends with ``NOT_FOUND``. Every call is counted and its metadata kept; :meth:`stop` frees
the port and :func:`connections_to` counts what still tries to reach it.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
from connection_counter import ConnectionCounter as ConnectionCounter  # re-exported for the tests
from google.protobuf.struct_pb2 import Struct


def struct(**fields: Any) -> Struct:
    message = Struct()
    message.update(fields)
    return message


class GrpcServer:
    """The test service; ``calls`` counts calls per method, ``metadata`` keeps each call's metadata."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.metadata: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._server: grpc.Server | None = None
        self.port = 0

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _seen(self, method: str, context: grpc.ServicerContext) -> None:
        with self._lock:
            self.calls[method] += 1
            self.metadata.append({k: str(v) for k, v in context.invocation_metadata()})

    def search(self, request: Struct, context: grpc.ServicerContext) -> Struct:
        self._seen("Search", context)
        query = request["query"]
        if query == "missing":
            context.set_trailing_metadata((("x-reason", "no-such-collection"),))
            context.abort(grpc.StatusCode.NOT_FOUND, f"collection for {query!r} not found")
        context.set_trailing_metadata((("x-served-by", "points-1"),))
        return struct(hits=[{"id": 1, "score": 0.9, "text": f"about {query}"}])

    def upsert(self, request: Struct, context: grpc.ServicerContext) -> Struct:
        self._seen("Upsert", context)
        return struct(status="acknowledged", count=len(request["points"]))

    def list_items(self, request: Struct, context: grpc.ServicerContext) -> Iterator[Struct]:
        self._seen("ListItems", context)
        for n in range(int(request["count"])):
            yield struct(n=n, name=f"item-{n}")

    def upload(self, requests: Iterator[Struct], context: grpc.ServicerContext) -> Struct:
        self._seen("Upload", context)
        names = [r["name"] for r in requests]
        return struct(stored=names)

    def chat(self, requests: Iterator[Struct], context: grpc.ServicerContext) -> Iterator[Struct]:
        self._seen("Chat", context)
        for r in requests:
            yield struct(echo=r["text"].upper())

    def start(self) -> GrpcServer:
        ser, de = Struct.SerializeToString, Struct.FromString
        points = grpc.method_handlers_generic_handler(
            "qdrant.Points",
            {
                "Search": grpc.unary_unary_rpc_method_handler(self.search, de, ser),
                "Upsert": grpc.unary_unary_rpc_method_handler(self.upsert, de, ser),
            },
        )
        items = grpc.method_handlers_generic_handler(
            "demo.Items",
            {
                "ListItems": grpc.unary_stream_rpc_method_handler(self.list_items, de, ser),
                "Upload": grpc.stream_unary_rpc_method_handler(self.upload, de, ser),
                "Chat": grpc.stream_stream_rpc_method_handler(self.chat, de, ser),
            },
        )
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        server.add_generic_rpc_handlers((points, items))
        self.port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        self._server = server
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(grace=None).wait()
            self._server = None
