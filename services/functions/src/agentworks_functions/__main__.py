from agentworks_functions.app import main

main()
