"""`python -m agentworks.agents.agent_mcp stdio`: the stdio bridge (`bridge.py`)."""

import sys

from agentworks.agents.agent_mcp.bridge import main

sys.exit(main())
