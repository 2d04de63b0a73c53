"""python -m experiments.report <folder of runs>"""

from experiments.report.command import main

raise SystemExit(main())
