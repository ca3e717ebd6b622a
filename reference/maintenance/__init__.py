"""The reference's background work as a deployable process (docs/resilience.md,
"The maintenance process")."""

from reference.maintenance.figures import MaintenanceFigures, MetricsServer, write_json_atomic
from reference.maintenance.lease import Lease, LeaseLost
from reference.maintenance.process import (
    EVENTS_GROUP,
    BatchFault,
    MaintenanceProcess,
    default_replica_name,
)
from reference.maintenance.runner import build_maintenance, run_maintenance
from reference.maintenance.serving import ServingBackground
from reference.maintenance.shared import SharedSessions

__all__ = [
    "EVENTS_GROUP",
    "BatchFault",
    "Lease",
    "LeaseLost",
    "MaintenanceFigures",
    "MaintenanceProcess",
    "MetricsServer",
    "ServingBackground",
    "SharedSessions",
    "build_maintenance",
    "default_replica_name",
    "run_maintenance",
    "write_json_atomic",
]
