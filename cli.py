"""The ``vflfs`` command: dispatches ``run``, ``report``, ``split`` and ``data`` to their modules.

vflfs run dataset=phishing ...    # = vflfs-run (Hydra training), vflfs.runtime.cli
vflfs report outputs/             # tables and plots over runs, vflfs.report.cli
vflfs split OUT_DIR ...           # per-party files, vflfs.runtime.split_files
vflfs data fetch all              # download the benchmarks, vflfs.runtime.data_cli
vflfs submit . vfl -c ...         # flwr run, then exit with the run's status, vflfs.runtime.submit
vflfs keygen keys/party_0         # a party's identity key pair, vflfs.runtime.keygen
"""

from __future__ import annotations

import argparse
import sys

HELP = {
    "run": "train one run or a Hydra sweep (the same as vflfs-run); `vflfs run --help` shows "
    "Hydra's options",
    "report": "table, plots and published figures over run folders; see `vflfs report --help`",
    "split": "per-party files with an ID column plus a labels file from any dataset (to try "
    "deployment on one machine); see `vflfs split --help`",
    "data": "download the benchmark datasets (`vflfs data fetch NAME|all`) and list them "
    "(`vflfs data list`); see `vflfs data --help`",
    "submit": "`flwr run` a deployment run, follow it, exit with its status (0 completed); "
    "see `vflfs submit --help`",
    "keygen": "a party's Ed25519 identity key pair (NAME.key, NAME.pub); see `vflfs keygen --help`",
}


def entry() -> None:
    """Run the command named by the first argument with the rest of the command line."""
    argv = sys.argv[1:]
    command, rest = (argv[0], argv[1:]) if argv else ("", [])
    if command == "run":
        from vflfs.runtime.cli import main as run_main

        sys.argv = ["vflfs run", *rest]
        run_main()
        return
    if command == "report":
        from vflfs.report.cli import main as report_main

        sys.exit(report_main(rest))
    if command == "split":
        from vflfs.runtime.split_files import main as split_main

        sys.exit(split_main(rest))
    if command == "data":
        from vflfs.runtime.data_cli import main as data_main

        sys.exit(data_main(rest))
    if command == "submit":
        from vflfs.runtime.submit import main as submit_main

        sys.exit(submit_main(rest))
    if command == "keygen":
        from vflfs.runtime.keygen import main as keygen_main

        sys.exit(keygen_main(rest))
    top_parser().parse_args(argv or ["--help"])


def top_parser() -> argparse.ArgumentParser:
    """``vflfs --help``: the commands."""
    p = argparse.ArgumentParser(prog="vflfs", description="Feature selection in VFL on Flower.")
    commands = p.add_subparsers(dest="command", metavar="{" + ",".join(HELP) + "}", required=True)
    for name, text in HELP.items():
        commands.add_parser(name, help=text, add_help=False)
    return p


if __name__ == "__main__":
    entry()
