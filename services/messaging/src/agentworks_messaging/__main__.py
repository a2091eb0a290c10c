from agentworks_messaging.app import main

main()
