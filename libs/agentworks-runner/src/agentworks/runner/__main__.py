import sys

from agentworks.runner.cli import main

sys.exit(main())
