"""The fail-closed network guard: during replay nothing leaves the process unless allowed, from
worker threads, asyncio tasks and raw sockets alike; recording and allowed loopback pass."""

from __future__ import annotations

import asyncio
import http.client
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from servers import LLMServer, MemoryCassette, run_in

from pytest_agentreplay.exceptions import NetworkBlockedError
from pytest_agentreplay.intercept import install

BLOCKED_IP = "203.0.113.5"  # TEST-NET-3: never routable, so a leak would only time out


def replay(settings: dict[str, object] | None = None) -> run_in:
    return run_in("regression", recorded=MemoryCassette([]), settings=settings, cassette="cassettes/t.json")


def _raw_connect(host: str = BLOCKED_IP, port: int = 80) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1)
        s.connect((host, port))


def test_worker_thread_without_context_is_blocked() -> None:
    with replay() as ctx, ThreadPoolExecutor(2) as pool:
        # Plain executor threads do not inherit the context variable: the process-wide run guards them.
        leak = pool.submit(
            lambda: http.client.HTTPConnection("api.example.com", 80, timeout=1).request("GET", "/")
        )
        with pytest.raises(NetworkBlockedError) as info:
            leak.result()
        with pytest.raises(NetworkBlockedError):
            pool.submit(_raw_connect).result()
    text = str(info.value)
    assert "api.example.com:80" in text
    assert "cassette: cassettes/t.json" in text and "mode: regression" in text
    assert "allow_hosts" in text and "--agentreplay-record=all" in text
    assert thread_names(ctx.failures)


def thread_names(failures: list[BaseException]) -> bool:
    return any("ThreadPoolExecutor" in str(f) for f in failures)


def test_asyncio_task_connections_are_blocked() -> None:
    async def main() -> None:
        async def by_ip() -> None:
            await asyncio.wait_for(asyncio.open_connection(BLOCKED_IP, 80), 2)

        async def by_name() -> None:
            await asyncio.wait_for(asyncio.open_connection("api.example.com", 443), 2)

        for coro in (by_ip, by_name):
            with pytest.raises(NetworkBlockedError):
                await asyncio.create_task(coro())

    with replay():
        asyncio.run(main())


def test_asyncio_loop_connects_through_sock_connect(monkeypatch: pytest.MonkeyPatch) -> None:
    # The guard relies on the event loop calling socket.connect: check that it does.
    seen: list[object] = []
    original = socket.socket.connect

    def spy(self: socket.socket, address: object) -> None:
        seen.append(address)
        original(self, address)

    monkeypatch.setattr(socket.socket, "connect", spy)
    with LLMServer() as server:

        async def main() -> None:
            _, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.close()

        asyncio.run(main())
    assert ("127.0.0.1", server.port) in seen


def test_raw_sockets_are_blocked() -> None:
    with replay():
        with pytest.raises(NetworkBlockedError):
            _raw_connect()
        with socket.socket() as s, pytest.raises(NetworkBlockedError):
            s.connect_ex((BLOCKED_IP, 443))
        with pytest.raises(NetworkBlockedError):
            socket.create_connection(("api.example.com", 443), timeout=1)
        with pytest.raises(NetworkBlockedError):
            socket.getaddrinfo("api.example.com", 443)


def test_loopback_and_localhost_can_be_allowed_by_name() -> None:
    with LLMServer() as server:
        with replay({"allow_hosts": ["loopback"]}):
            _raw_connect("127.0.0.1", server.port)
            with ThreadPoolExecutor(1) as pool:
                pool.submit(_raw_connect, "127.0.0.1", server.port).result()

            async def main() -> None:
                _, writer = await asyncio.open_connection("127.0.0.1", server.port)
                writer.close()

            asyncio.run(main())
        with replay({"allow_hosts": ["localhost"]}):
            # Matched by the name as given, not by the resolved address.
            socket.create_connection(("localhost", server.port), timeout=2).close()
            conn = http.client.HTTPConnection("localhost", server.port, timeout=2)
            conn.request("GET", "/tools/weather?city=Oslo")
            assert conn.getresponse().status == 200
        with replay({"allow_hosts": ["other.example"]}), pytest.raises(NetworkBlockedError):
            _raw_connect("127.0.0.1", server.port)


def test_unix_sockets_always_pass(tmp_path: Path) -> None:
    if not hasattr(socket, "AF_UNIX"):
        pytest.skip("no AF_UNIX on this platform")
    path = str(tmp_path / "s.sock")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(path)
        server.listen(1)
        with replay(), socket.socket(socket.AF_UNIX) as client:
            client.connect(path)


def test_recording_runs_are_not_blocked_and_guard_is_inert_without_runs() -> None:
    with LLMServer() as server:
        with run_in("record"):
            _raw_connect("127.0.0.1", server.port)
        uninstall = install()
        try:
            _raw_connect("127.0.0.1", server.port)
        finally:
            uninstall()


def test_guard_refuses_from_every_thread_while_replay_active() -> None:
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            _raw_connect()
        except NetworkBlockedError as exc:
            errors.append(exc)

    with replay():
        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(errors) == 4


def test_http_layer_serves_while_guard_blocks_unknown_clients() -> None:
    import httpx2  # optional: a dev dependency, as every intercepted client

    with replay() as ctx:
        with httpx2.Client() as client, pytest.raises(Exception) as info:
            client.get("https://api.example.com/v1/models")
        # The intercepted client is served (here: nothing recorded -> unmatched), never sent.
        assert "no recorded HTTP exchange" in str(info.value)
    assert ctx.failures
