from agentworks_functions.server import main

main()
