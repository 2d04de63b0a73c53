"""python -m experiments.devices [device overrides]"""

import sys

from experiments.devices.command import main

sys.exit(main())
