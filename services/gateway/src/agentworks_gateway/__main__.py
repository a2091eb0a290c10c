from agentworks_gateway.server import main

main()
