#!/usr/bin/env python
"""Django's command-line utility for Evalsite (``--db PATH`` works here too)."""

import os
import sys

if __name__ == "__main__":
    from evalsite.cli import take_db_option

    argv = [sys.argv[0], *take_db_option(sys.argv[1:])]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(argv)
