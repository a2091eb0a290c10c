"""The gateway's tools (G1, G2): `registry` lists them and runs a call, one module per tool
(or per service's group of tools) translates, `arguments` checks, `toolkit` is shared.

`from agentworks_gateway import tools` then `tools.call_tool`, `tools.mcp_tools`,
`tools.TOOLS`, `tools.find_tool` and `tools.check_arguments`.
"""

from agentworks_gateway.tools.arguments import check_arguments
from agentworks_gateway.tools.registry import TOOLS, call_tool, find_tool, mcp_tools
from agentworks_gateway.tools.toolkit import Args, Handler, Tool

__all__ = [
    "TOOLS",
    "Args",
    "Handler",
    "Tool",
    "call_tool",
    "check_arguments",
    "find_tool",
    "mcp_tools",
]
