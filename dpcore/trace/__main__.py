"""python -m dpcore.trace merge FILE.json: the Chrome trace of what the ranks of a job that did
not end normally (killed, aborted) streamed to FILE.rank<R>.jsonl, up to their last collective.
The rank files are kept unless --remove."""
from .._cli.args import Parser
from .._cli.errors import UsageError, run_main
from . import merge


def main(argv=None):
    parser = Parser(prog="python -m dpcore.trace", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("merge", help="merge the ranks' files into FILE.json")
    m.add_argument("path", metavar="FILE.json", help="the trace DPCORE_TRACE named")
    m.add_argument("--remove", action="store_true", help="remove the rank files once merged")
    args = parser.parse_args(argv)
    paths = merge.rank_paths(args.path)
    if not paths:
        raise UsageError(f"no {merge.rank_path(args.path, '*')} found")
    spans = merge.write(args.path, paths, remove=args.remove)
    print(f"{args.path}: {spans} spans from {len(paths)} rank files")


if __name__ == "__main__":
    run_main(main)
