"""Writes a synthetic "long-tail" allocation trace (tidemark's replay CSV).

Request sizes follow a Pareto law (most requests are a few KiB, a few are
hundreds of MiB), and so do lifetimes (most tensors die within a few
allocations, a few live for most of the run); 2% are never freed, like a
model's parameters.  Sizes are rounded to 512 bytes, as a framework's
allocator sees them after its own alignment.  Seeded: the same arguments
write the same file.

    python3 gen_longtail.py [--seed N] [--count N] OUT.csv
"""
import argparse
import heapq
import random

KiB, MiB = 1024, 1024 * 1024


def request_size(rng):
    # alpha 1.1 gives a heavy tail; the cap keeps one draw from dwarfing the run.
    size = int(4 * KiB * rng.paretovariate(1.1))
    return min(max(512, size // 512 * 512), 256 * MiB)


def lifetime(rng):
    # In allocations that happen before the free: mostly short, a long tail.
    return int(rng.paretovariate(0.9))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("out")
    args = parser.parse_args()
    rng = random.Random(args.seed)

    rows, pending, now = [], [], 0
    for alloc_id in range(1, args.count + 1):
        now += rng.randint(200, 2000)  # ns between requests
        while pending and pending[0][0] <= alloc_id:
            _, fid, fsize = heapq.heappop(pending)
            rows.append(f"free,{now},{fid},{fsize},")
            now += rng.randint(50, 500)
        size = request_size(rng)
        rows.append(f"alloc,{now},{alloc_id},{size},")
        if rng.random() >= 0.02:
            heapq.heappush(pending, (alloc_id + 1 + lifetime(rng), alloc_id, size))
    with open(args.out, "w") as f:
        f.write("# tidemark replay trace v1: synthetic long-tail "
                f"(gen_longtail.py --seed {args.seed} --count {args.count})\n")
        f.write("action,time_ns,id,size,category\n")
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
