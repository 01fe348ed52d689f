#!/usr/bin/env python3
"""Many fake Archives on loopback, in one process: each port answers every request with an
empty list of pairs (an Archive that does not hold the IBI), after a delay (a slow one), or
never (a silent one: it accepts the connection and reads, and answers nothing).

    python3 bench/fake_archives.py --empty 990 --slow 5 --delay 0.3 --silent 5

prints one JSON line, {"empty": [ports], "slow": [ports], "silent": [ports]}, then serves
until its standard input closes (so it ends with the benchmark that started it). asyncio with
keep-alive: a thousand Archives cost one process and no thread each.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys

EMPTY = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 0\r\n\r\n"


async def answer(reader, writer, delay: float | None) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            if not head:
                return
            if delay is None:  # silent: keep reading, never answer
                continue
            if delay:
                await asyncio.sleep(delay)
            writer.write(EMPTY)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--empty", type=int, default=40)
    parser.add_argument("--slow", type=int, default=0)
    parser.add_argument("--delay", type=float, default=0.3)
    parser.add_argument("--silent", type=int, default=0)
    args = parser.parse_args()
    ports: dict[str, list[int]] = {"empty": [], "slow": [], "silent": []}
    servers = []
    for kind, count, delay in (
        ("empty", args.empty, 0.0),
        ("slow", args.slow, args.delay),
        ("silent", args.silent, None),
    ):
        for _ in range(count):
            server = await asyncio.start_server(
                lambda r, w, d=delay: answer(r, w, d), "127.0.0.1", 0, backlog=256
            )
            servers.append(server)
            ports[kind].append(server.sockets[0].getsockname()[1])
    print(json.dumps(ports), flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)  # until the benchmark goes away
    os._exit(0)  # at once: a thousand connections' tasks need no orderly cancelling


if __name__ == "__main__":
    asyncio.run(main())
