from agentworks_dev.up import main

raise SystemExit(main())
