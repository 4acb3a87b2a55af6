"""Who am I? Rank, world size and rendezvous address from the launcher's environment.

Each launcher announces a process's place in the job through environment
variables, under its own names:

- torchrun (and anything imitating it): RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
- Open MPI's mpirun: OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK
- MPICH / Intel MPI (Hydra's mpiexec): PMI_RANK, PMI_SIZE, MPI_LOCALRANKID

``launch_info`` reads them in that order (the first family that sets a rank wins)
and checks them, so a typo in a job script is an error that names the variable,
never a hang.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

# (rank, world size, local rank) variable names, most specific launcher first.
LAUNCHERS = (
    ("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"),
    ("mpirun (Open MPI)", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
    ("mpiexec (MPICH/Hydra)", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
)


@dataclass(frozen=True)
class LaunchInfo:
    """What the launcher told this process; ``launcher`` is None when nothing was found."""

    rank: int | None
    world_size: int | None
    local_rank: int | None
    master_addr: str | None
    master_port: int | None
    launcher: str | None

    @property
    def by_mpi(self) -> bool:
        """Started by an MPI launcher (so MPI itself can exchange data at start-up)."""
        return self.launcher is not None and "mpi" in self.launcher


def _int(environ, name, minimum=0):
    raw = environ.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"environment variable {name}={raw!r} is not an integer") from None
    if value < minimum:
        raise ValueError(f"environment variable {name}={raw!r} must be >= {minimum}")
    return value


def launch_info(environ=None) -> LaunchInfo:
    """Parse ``environ`` (default ``os.environ``) into a :class:`LaunchInfo`."""
    environ = os.environ if environ is None else environ
    rank = world = local = launcher = None
    for name, rank_var, world_var, local_var in LAUNCHERS:
        r, w = _int(environ, rank_var), _int(environ, world_var, minimum=1)
        if r is None and w is None:
            continue
        if r is None or w is None:
            have, missing = (rank_var, world_var) if w is None else (world_var, rank_var)
            raise ValueError(f"environment variable {have} is set but {missing} is not; {name} sets both")
        if r >= w:
            raise ValueError(f"{rank_var}={r} is not a valid rank for {world_var}={w} (expected 0..{w - 1})")
        rank, world, local, launcher = r, w, _int(environ, local_var), name
        break
    addr = environ.get("MASTER_ADDR") or None
    port = _int(environ, "MASTER_PORT", minimum=1)
    if port is not None and port > 65535:
        raise ValueError(f"environment variable MASTER_PORT={port} is not a TCP port (1..65535)")
    return LaunchInfo(rank, world, local, addr, port, launcher)


def describe_variables() -> str:
    """The variables we look for, for error messages."""
    return "; ".join(f"{name}: {r}/{w}" for name, r, w, _ in LAUNCHERS)
