"""Training schedules, one module each, registered by name."""

from simcluster.schedules import ddp  # noqa: F401  (registers)
from simcluster.schedules.base import (
    SCHEDULES,
    BuildContext,
    Iteration,
    Options,
    Schedule,
    get_schedule,
    list_schedules,
    register,
)

__all__ = [
    "SCHEDULES",
    "BuildContext",
    "Iteration",
    "Options",
    "Schedule",
    "get_schedule",
    "list_schedules",
    "register",
]
