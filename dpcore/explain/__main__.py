"""python -m dpcore.explain COLLECTIVE --ranks N [--algo ALGO] [--count N]: no MPI needed.
`python -m dpcore.explain sendrecv` says what point to point costs."""
from ..bench.plot import check_matplotlib
from .._cli.args import Parser, whole
from .._cli.errors import run_main
from ..cost.formulas import ALGORITHMS, COLLECTIVES
from . import simulate
from .picture import draw
from .render import point_to_point, render

MAX_RANKS = 64  # 6 s and 0.3 GB here; 128 took 54 s and 4 GB


def main(argv=None):
    parser = Parser(prog="python -m dpcore.explain", description=__doc__)
    parser.add_argument("coll", choices=COLLECTIVES + ("sendrecv",))
    # every step of every rank is simulated and drawn: time and memory grow as ranks^3
    parser.add_argument("--ranks", type=whole(1, MAX_RANKS), default=4,
                        help=f"at most {MAX_RANKS} (dpcore.cost predicts any count)")
    parser.add_argument("--algo", choices=ALGORITHMS, default="ring")
    parser.add_argument("--count", type=whole(0), default=None,
                        help="elements in the whole buffer (default 262144 per rank)")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--root", type=int, default=0,
                        help="the root of broadcast, reduce, gather and scatter")
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
    if args.coll == "sendrecv":
        from numpy import dtype

        print(point_to_point(args.ranks, count * dtype(args.dtype).itemsize), flush=True)
        return 0
    try:
        sim = simulate(args.coll, args.algo, args.ranks, count, args.dtype, args.root,
                       args.local_size, args.segments)
    except ValueError as e:
        parser.error(str(e))
    if args.plot:
        draw(sim, args.plot)
    print(render(sim), flush=True)
    return 0


if __name__ == "__main__":
    run_main(main)
