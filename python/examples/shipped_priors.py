"""One episode per cluster that follows the shipped GNN policy's most likely action at every
vertex, against uniformly random actions, on random clusters the policy never saw.

    python python/examples/shipped_priors.py --clusters 10 --random 20

prints, per cluster, the reward (DP-NCCL's time over the strategy's, less one; −1 when out of
memory) of the greedy episode and the mean and best of the random ones, then the means.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
from pathlib import Path

import topoplace as tp


def episode(env: tp.PlacementEnv, choose) -> float:
    env.reset()
    reward, done = 0.0, False
    while not done:
        _, reward, done, _, _ = env.step(choose(env))
    return reward


def greedy(env: tp.PlacementEnv) -> int:
    priors = env.priors("shipped")
    return max(range(len(priors)), key=priors.__getitem__)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="vgg19")
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--random", type=int, default=20, help="random episodes per cluster")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    draw = random.Random(args.seed)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.clusters):
            # Never drawn in training: training/tag-expert.toml draws seeds 0..1000.
            cluster = tp.random_topology(900_000 + k, Path(tmp) / f"unseen-{k}.toml")
            env = tp.PlacementEnv(args.model, cluster)
            g = episode(env, greedy)
            r = [episode(env, lambda e: draw.randrange(len(e.actions))) for _ in range(args.random)]
            rows.append((g, statistics.mean(r), max(r)))
            print(f"cluster {k}: shipped-greedy {g:+.3f}   random mean {rows[-1][1]:+.3f}"
                  f"   random best {rows[-1][2]:+.3f}")
    greedy_mean = statistics.mean(g for g, _, _ in rows)
    random_mean = statistics.mean(m for _, m, _ in rows)
    wins = sum(g > m for g, m, _ in rows)
    print(f"mean reward: shipped-greedy {greedy_mean:+.3f}, random {random_mean:+.3f}; "
          f"greedy above the random mean on {wins} of {len(rows)} clusters")


if __name__ == "__main__":
    main()
