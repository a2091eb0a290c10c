from agentworks_scheduler.server import main

main()
