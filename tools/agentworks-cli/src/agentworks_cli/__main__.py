from agentworks_cli.main import main

raise SystemExit(main())
