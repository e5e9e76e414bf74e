"""Training schedules, one module each, registered by name.

Every module here except the helpers (``base``, ``training``) defines a
schedule class decorated with :func:`register`; :func:`get_schedule` imports
them on first use, so a new schedule is a new module and nothing else.
"""

from simcluster.schedules.base import (
    SCHEDULES,
    BuildContext,
    Iteration,
    Options,
    RunShape,
    Schedule,
    Segment,
    get_schedule,
    list_schedules,
    register,
    scenario_schedules,
)

__all__ = [
    "SCHEDULES",
    "BuildContext",
    "Iteration",
    "Options",
    "RunShape",
    "Schedule",
    "Segment",
    "get_schedule",
    "list_schedules",
    "register",
    "scenario_schedules",
]
