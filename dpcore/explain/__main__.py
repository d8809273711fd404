"""python -m dpcore.explain COLLECTIVE --ranks N [--algo ALGO] [--count N]: no MPI needed."""
import os
import sys

from ..bench.plot import check_matplotlib
from .._cli.args import Parser, whole
from ..cost.formulas import ALGORITHMS, COLLECTIVES
from . import simulate
from .picture import draw
from .render import render


def main(argv=None):
    parser = Parser(prog="python -m dpcore.explain", description=__doc__)
    parser.add_argument("coll", choices=COLLECTIVES)
    parser.add_argument("--ranks", type=whole(1), default=4)
    parser.add_argument("--algo", choices=ALGORITHMS, default="ring")
    parser.add_argument("--count", type=int, default=None,
                        help="elements in the whole buffer (default 262144 per rank)")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--root", type=int, default=0, help="broadcast root")
    parser.add_argument("--local-size", type=int, default=None,
                        help="ranks per node for hierarchical (default: 2 nodes or more)")
    parser.add_argument("--segments", type=int, default=None,
                        help="segments of the broadcast chains (default: as many as ranks)")
    parser.add_argument("--plot", metavar="FILE.png", default=None,
                        help="also draw the steps as a picture (needs matplotlib)")
    args = parser.parse_args(argv)
    if args.plot:
        check_matplotlib()
    count = args.count if args.count is not None else 262144 * args.ranks
    try:
        sim = simulate(args.coll, args.algo, args.ranks, count, args.dtype, args.root,
                       args.local_size, args.segments)
    except ValueError as e:
        parser.error(str(e))
    if args.plot:
        draw(sim, args.plot)
    try:
        print(render(sim), flush=True)
    except BrokenPipeError:  # `| head` stopped reading: not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # for the exit's flush
    return 0


if __name__ == "__main__":
    sys.exit(main())
