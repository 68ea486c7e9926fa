"""The Dagster code location of the demo warehouse (maintenance assets arrive with the Dagster plugin).

Until then it only exposes an empty Definitions object so `workspace.yaml` loads.
"""

import dagster as dg

defs = dg.Definitions()
