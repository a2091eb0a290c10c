"""`python -m agentworks.runtime`: the `agentworks-runtime` command (`cli`)."""

import sys

from agentworks.runtime.cli import main

sys.exit(main())
