"""`python -m agentworks.runtime.agent_mcp stdio`: the stdio bridge (`bridge.py`)."""

import sys

from agentworks.runtime.agent_mcp.bridge import main

sys.exit(main())
