"""A TCP proxy on loopback that can hold what the client sends: a server that stops answering
(as a busy scheduler workflow stalls DescribeSchedule until the call's deadline), for tests
against a real dev server.

While ``held``, nothing the client sends reaches the upstream (the bytes wait in the proxy, in
order); what the upstream sends still flows back. ``release`` lets everything through again.
Connections made while held are accepted and held too. The proxy runs an asyncio loop on a
daemon thread and is stopped with ``stop()``.
"""
from __future__ import annotations

import asyncio
import socket
import threading


class StallProxy:
    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.held_chunks = 0  # client writes that had to wait for a release
        self._writers: set[asyncio.StreamWriter] = set()
        self._loop = asyncio.new_event_loop()
        self._flowing = asyncio.Event()
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port: int = self._sock.getsockname()[1]
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stall-proxy", daemon=True)
        self._thread.start()
        if not self._started.wait(10):
            raise RuntimeError("the stall proxy did not start")

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def hold(self) -> None:
        self._loop.call_soon_threadsafe(self._flowing.clear)

    def release(self) -> None:
        self._loop.call_soon_threadsafe(self._flowing.set)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def main() -> None:
            self._flowing.set()
            self._server = await asyncio.start_server(self._serve, sock=self._sock)
            self._started.set()
        self._loop.run_until_complete(main())
        self._loop.run_forever()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        await asyncio.gather(self._pipe(reader, up_writer, gated=True),
                             self._pipe(up_reader, writer, gated=False))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    gated: bool) -> None:
        try:
            while data := await reader.read(65536):
                if gated and not self._flowing.is_set():
                    self.held_chunks += 1
                    await self._flowing.wait()
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            self._writers.discard(writer)
            if not self._loop.is_closed():
                writer.close()

    def stop(self) -> None:
        async def close() -> None:
            self._flowing.set()
            self._server.close()
            for writer in list(self._writers):
                writer.close()
        if self._loop.is_closed():
            return
        asyncio.run_coroutine_threadsafe(close(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
