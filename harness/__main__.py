import sys

from scalerl.harness.cli import main

sys.exit(main())
