"""A TCP proxy on loopback that holds every byte the upstream sends back for ``delay`` seconds
(order kept), for tests of a destination that answers slowly: in front of a dev server's gRPC
port, every answer (the connection's set-up too) arrives ``delay`` s late, while requests go
through at once. It runs an asyncio loop on a daemon thread; ``stop()`` ends it."""
from __future__ import annotations

import asyncio
import threading
import time


class DelayProxy:
    def __init__(self, upstream: tuple[str, int], delay: float) -> None:
        self.upstream, self.delay = upstream, delay
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="delay-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the delaying proxy did not start")

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(
            asyncio.start_server(self._client, "127.0.0.1", 0))
        self.port = self.server.sockets[0].getsockname()[1]
        self._ready.set()
        self.loop.run_forever()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pipe(reader, up_writer, 0.0),
                             self._pipe(up_reader, writer, self.delay),
                             return_exceptions=True)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    delay: float) -> None:
        held: asyncio.Queue = asyncio.Queue()

        async def send() -> None:
            while True:
                due, data = await held.get()
                if data is None:
                    break
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                writer.write(data)
                await writer.drain()
        sender = asyncio.ensure_future(send())
        try:
            while data := await reader.read(65536):
                held.put_nowait((time.monotonic() + delay, data))
        finally:
            held.put_nowait((0.0, None))
            try:
                await sender
            finally:
                writer.close()

    def stop(self) -> None:
        async def close() -> None:
            self.server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()
        asyncio.run_coroutine_threadsafe(close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
