#!/usr/bin/env python
"""Django's command-line utility for Evalsite (``--db PATH`` works here too)."""

import os
import sys

if __name__ == "__main__":
    from evalsite.cli import take_db_option
    from evalsite.paths import load_env_file

    load_env_file()  # the project folder's .env, as the `evalsite` command reads it
    argv = [sys.argv[0], *take_db_option(sys.argv[1:])]
    if len(argv) > 1:
        os.environ["EVALSITE_COMMAND"] = argv[1]  # settings load no web stack for the command-line tools
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(argv)
