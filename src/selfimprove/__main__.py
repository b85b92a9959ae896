"""`python -m selfimprove` = the `selfimprove` command."""

from .cli import main

main()
