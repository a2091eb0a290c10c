import sys

from agentworks_dev.up import main

raise SystemExit(main(sys.argv[1:]))
