from agentworks_gateway.app import main

raise SystemExit(main())
