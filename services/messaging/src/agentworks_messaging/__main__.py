from agentworks_messaging.server import main

main()
