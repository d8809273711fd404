"""What the `python -m dpcore.*` command lines share: argument parsing on rank 0 (args.py) and one
line, not a traceback, for the errors a user makes (errors.py). Private to dpcore's commands."""
