#!/usr/bin/env python3
"""Write queuectl's man pages (from the Click help, by click-man) and its bash completion (by Click).

Usage: gen-docs.py OUTDIR  ->  OUTDIR/man/queuectl.1, queuectl-enqueue.1, ...
                               OUTDIR/bash-completion/queuectl
"""

import os
import sys

from click.shell_completion import BashComplete
from click_man.core import write_man_pages

from queuectl import __version__
from queuectl.cli import cli


def main(outdir: str) -> None:
    man = os.path.join(outdir, "man")
    completion = os.path.join(outdir, "bash-completion")
    os.makedirs(man, exist_ok=True)
    os.makedirs(completion, exist_ok=True)
    cli.load_all()  # click-man walks cli.commands, which loads lazily
    write_man_pages("queuectl", cli, version=__version__, target_dir=man)
    with open(os.path.join(completion, "queuectl"), "w") as f:
        f.write(BashComplete(cli, {}, "queuectl", "_QUEUECTL_COMPLETE").source())


if __name__ == "__main__":
    main(sys.argv[1])
