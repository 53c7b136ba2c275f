"""``vflfs data``: download the benchmark datasets and show where they are.

vflfs data fetch phishing madelon      # or: vflfs data fetch all
vflfs data list                        # the data folder and which benchmarks it holds
vflfs data path                        # the data folder only

The folder is ``--data-dir``, else ``$VFLFS_DATA_DIR``, else the user's cache folder: the same
one the loaders read when ``dataset.data_dir`` is not set.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console

from vflfs.datasets.errors import DataError
from vflfs.datasets.fetch import FileState, dataset_path, fetch_dataset, file_state
from vflfs.datasets.paths import DATA_DIR_ENV, benchmark_data_dir, resolve_data_dir
from vflfs.datasets.sources import SPECS, get_spec


def data_parser(prog: str = "vflfs data") -> argparse.ArgumentParser:
    """The commands and options of ``vflfs data``."""
    p = argparse.ArgumentParser(prog=prog, description="Download and list benchmark datasets.")
    commands = p.add_subparsers(dest="command", required=True, metavar="{fetch,list,path}")
    fetch = commands.add_parser("fetch", help="download, convert and check benchmarks")
    fetch.add_argument("names", nargs="+", metavar="NAME", help=f"{', '.join(SPECS)} or all")
    fetch.add_argument(
        "--sources",
        type=Path,
        help="keep the downloaded source files here and reuse those already here (e.g. copied "
        "by hand to a machine without internet); default: a temporary folder",
    )
    fetch.add_argument("--force", action="store_true", help="fetch even if present and valid")
    listing = commands.add_parser("list", help="the data folder and the benchmarks it holds")
    where = commands.add_parser("path", help="print the data folder")
    for command in (fetch, listing, where):
        command.add_argument(
            "--data-dir",
            type=Path,
            help=f"the data folder (default ${DATA_DIR_ENV}, else the user cache folder)",
        )
    return p


def main(argv: list[str] | None = None) -> int:
    """Run ``vflfs data``; 0 on success, 1 when a fetch failed, 2 on bad input."""
    args = data_parser().parse_args(argv)
    data_dir = benchmark_data_dir(resolve_data_dir(args.data_dir)).absolute()
    if args.command == "path":
        print(data_dir)
        return 0
    if args.command == "list":
        return list_datasets(data_dir)
    return fetch_datasets(args.names, data_dir, args.sources, args.force)


def fetch_datasets(names: list[str], data_dir: Path, sources: Path | None, force: bool) -> int:
    """Fetch each named benchmark (``all``: every one); report each failure and go on."""
    try:
        specs = [get_spec(n) for n in dict.fromkeys(names) if n != "all"]
    except DataError as error:
        print(f"vflfs data fetch: error: {error}", file=sys.stderr)
        return 2
    if "all" in names:
        specs = list(SPECS.values())
    print(f"data folder: {data_dir}")
    console = Console(stderr=True, soft_wrap=True)
    failed = []
    for spec in specs:
        try:
            fetch_dataset(spec, data_dir, sources=sources, force=force, console=console)
        except (DataError, OSError) as error:
            print(f"vflfs data fetch: error: {error}", file=sys.stderr)
            failed.append(spec.name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    print(f"ready: {', '.join(spec.name for spec in specs)}")
    return 0


def list_datasets(data_dir: Path) -> int:
    """Print the data folder and, per benchmark, whether its file is there and valid."""
    print(f"data folder: {data_dir}")
    width = max(len(name) for name in SPECS)
    for spec in SPECS.values():
        state = file_state(spec, data_dir)
        n, d = spec.shape
        note = {
            FileState.VALID: "",
            FileState.MISSING: f"  (vflfs data fetch {spec.name})",
            FileState.DIFFERENT: "  (not the published data; vflfs data fetch replaces it)",
            FileState.UNREADABLE: "  (not a readable .npz; vflfs data fetch replaces it)",
        }[state]
        size = f"{n} x {d}"
        print(f"  {spec.name:<{width}}  {state.value:<10} {size:>12}  {spec.source}{note}")
    if not any(dataset_path(s, data_dir).is_file() for s in SPECS.values()):
        print("none present; download them with: vflfs data fetch all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
