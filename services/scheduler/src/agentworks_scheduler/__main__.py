from agentworks_scheduler.app import main

main()
