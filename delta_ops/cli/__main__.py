"""``python -m delta_ops.cli``: the same as the `delta-ops` command."""

import sys

from delta_ops.cli.main import main

sys.exit(main())
