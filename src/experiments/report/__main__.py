"""python -m experiments.report <folder of runs>"""

import sys

from experiments.report.command import main

sys.exit(main())
