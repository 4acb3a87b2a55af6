"""Start-up handshake over TCP: rank 0 hands one small payload to every other rank.

NCCL needs every process to hold the same 128-byte id (made by rank 0) before
it can build a communicator. torchrun-style jobs say where rank 0 listens with
MASTER_ADDR and MASTER_PORT; this module is that exchange and nothing more
(after it, all traffic goes through NCCL). Each client also sends its rank and
the world size it was told, so a mis-configured job fails here with a message
instead of hanging inside NCCL.
"""
from __future__ import annotations

import socket
import struct
import time

_HELLO = struct.Struct("!ii")  # rank, world size
_LENGTH = struct.Struct("!I")


def _recv_exact(sock, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(n - got)
        if not chunk:
            raise ConnectionError("the other side closed the connection during the rendezvous")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def share_from_rank0(payload: bytes | None, rank: int, world_size: int, addr: str, port: int,
                     timeout: float) -> bytes:
    """Rank 0 passes ``payload``; every rank returns it. Raises TimeoutError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    if rank == 0:
        return _serve(payload, world_size, port, deadline)
    return _fetch(rank, world_size, addr, port, deadline)


def _serve(payload, world_size, port, deadline):
    try:
        server = socket.create_server(("", port))
    except OSError as exc:
        raise RuntimeError(f"rank 0 cannot listen on MASTER_PORT={port} for the rendezvous ({exc}); "
                           "choose a free port") from None
    waiting = set(range(1, world_size))
    with server:
        while waiting:
            server.settimeout(max(deadline - time.monotonic(), 0.001))
            try:
                conn, _ = server.accept()
            except socket.timeout:
                raise TimeoutError(f"rendezvous on port {port}: ranks {sorted(waiting)} did not connect "
                                   "in time (are all processes started, with the same MASTER_ADDR/MASTER_PORT?)"
                                   ) from None
            with conn:
                conn.settimeout(max(deadline - time.monotonic(), 0.001))
                rank, their_world = _HELLO.unpack(_recv_exact(conn, _HELLO.size))
                if their_world != world_size:
                    raise RuntimeError(f"rendezvous: rank {rank} was started with world size {their_world}, "
                                       f"rank 0 with {world_size}")
                if rank not in waiting:
                    raise RuntimeError(f"rendezvous: rank {rank} connected twice or is out of range "
                                       f"(world size {world_size}); two processes share a rank?")
                conn.sendall(_LENGTH.pack(len(payload)) + payload)
                waiting.discard(rank)
    return payload


def _fetch(rank, world_size, addr, port, deadline):
    while True:
        try:
            sock = socket.create_connection((addr, port), timeout=max(deadline - time.monotonic(), 0.001))
            break
        except OSError as exc:  # rank 0 not listening yet: retry until the deadline
            if time.monotonic() >= deadline:
                raise TimeoutError(f"rendezvous: rank {rank} could not reach rank 0 at {addr}:{port} ({exc})"
                                   ) from None
            time.sleep(0.05)
    with sock:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        sock.sendall(_HELLO.pack(rank, world_size))
        (n,) = _LENGTH.unpack(_recv_exact(sock, _LENGTH.size))
        return _recv_exact(sock, n)
