import os
import sys

# `python -m oloproof` puts the working directory first on sys.path; the suite appends its project
# directory after the installed packages instead, so a project file never shadows a dependency
if sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from oloproof_core.cli import main

main()
