"""Where the bench writes its rows besides the table: --json FILE (the run and its rows), --csv FILE
(one line per row, the rows' keys as columns, for pandas.read_csv), and nccl-tests' -J FILE,
which picks one of those by the file's suffix."""
import argparse
import csv
import json
import os

KINDS = ("json", "csv")


def output_file(path):
    """-J's type: ("json" or "csv", path), by the suffix, as nccl-tests infers it."""
    kind = os.path.splitext(path)[1][1:].lower()
    if kind not in KINDS:
        raise argparse.ArgumentTypeError(f"{path}: -J infers the format from the suffix: "
                                         f"{' or '.join('.' + k for k in KINDS)}")
    return kind, path


def targets(args):
    """{"json": path, "csv": path} from --json, --csv and -J (which settles them first)."""
    chosen = {kind: getattr(args, kind) for kind in KINDS if getattr(args, kind)}
    if args.output_file:
        kind, path = args.output_file
        if chosen.get(kind, path) != path:
            raise ValueError(f"-J {path} and --{kind} {chosen[kind]} name two {kind} files")
        chosen[kind] = path
    return chosen


def missing_folder(path):
    """The folder `path` would be written into where it does not exist, else None."""
    folder = os.path.dirname(os.path.abspath(path))
    return None if os.path.isdir(folder) else folder


def write(kind, path, doc):
    """Write the run's document (--json's) as `kind`."""
    with open(path, "w", newline="") as f:
        if kind == "json":
            json.dump(doc, f, indent=1)
            return
        columns = list(dict.fromkeys(k for row in doc["rows"] for k in row))
        writer = csv.DictWriter(f, columns, restval="")
        writer.writeheader()
        writer.writerows(doc["rows"])
