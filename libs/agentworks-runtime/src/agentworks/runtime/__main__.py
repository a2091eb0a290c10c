import sys

from agentworks.runtime.cli import main

sys.exit(main())
