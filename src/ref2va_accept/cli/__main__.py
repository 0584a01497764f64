"""`python -m ref2va_accept.cli`: the command line."""

import sys

from ref2va_accept.cli import main

sys.exit(main())
