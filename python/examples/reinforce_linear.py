"""A small placement policy learned on the environment: a linear softmax over per-action
features, trained by REINFORCE on random clusters, then judged on clusters it never saw against
uniformly random actions. Pure Python: no numpy, no torch, a few minutes on one CPU core.

    python python/examples/reinforce_linear.py --train-clusters 4 --episodes 120 --test-clusters 10

An action's features do not depend on the cluster's size, so one weight vector serves every
cluster: the option (one-hot), the share of device groups it uses, the mean features of those
device groups (memory, speed, bandwidth, and the runtime feedback the observation carries), and
the option crossed with the deciding op group's compute and parameter features.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import tempfile
from pathlib import Path

import topoplace as tp

OPTIONS = 4


def action_features(observation: dict, slices: list) -> list[list[float]]:
    group = observation["group"]
    op = list(observation["op_features"][group])[:3]
    devs = [list(row) for row in observation["dev_features"]]
    rows = []
    for placement, option in slices:
        used = [d for d, on in zip(devs, placement) if on]
        mean = [sum(col) / len(used) for col in zip(*used)] if used else [0.0] * len(devs[0])
        onehot = [1.0 if o == option else 0.0 for o in range(OPTIONS)]
        crossed = [h * x for h in onehot for x in op]
        rows.append(onehot + [sum(placement) / len(placement)] + mean + crossed)
    return rows


def softmax(scores: list[float]) -> list[float]:
    top = max(scores)
    e = [math.exp(s - top) for s in scores]
    total = sum(e)
    return [x / total for x in e]


def run_episode(env, weights, draw, learn=False):
    """One episode; with `learn`, also the gradient of the log-probability of its actions."""
    observation, _ = env.reset()
    grad = [0.0] * len(weights)
    reward, done = 0.0, False
    while not done:
        feats = action_features(observation, env.slices)
        probs = softmax([sum(w * f for w, f in zip(weights, row)) for row in feats])
        action = draw.choices(range(len(probs)), probs)[0]
        if learn:
            expected = [sum(p * row[k] for p, row in zip(probs, feats)) for k in range(len(weights))]
            grad = [g + f - e for g, f, e in zip(grad, feats[action], expected)]
        observation, reward, done, _, _ = env.step(action)
    return reward, grad


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="vgg19")
    parser.add_argument("--groups", type=int, default=16)
    parser.add_argument("--train-clusters", type=int, default=4)
    parser.add_argument("--episodes", type=int, default=120)
    parser.add_argument("--test-clusters", type=int, default=10)
    parser.add_argument("--test-episodes", type=int, default=10)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    draw = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        def env_for(seed: int) -> tp.PlacementEnv:
            cluster = tp.random_topology(seed, Path(tmp) / f"c{seed}.toml")
            return tp.PlacementEnv(args.model, cluster, groups=args.groups)

        train = [env_for(100_000 + k) for k in range(args.train_clusters)]
        weights = [0.0] * len(action_features(train[0].reset()[0], train[0].slices)[0])
        baseline = None
        for episode in range(args.episodes):
            env = train[episode % len(train)]
            reward, grad = run_episode(env, weights, draw, learn=True)
            baseline = reward if baseline is None else 0.9 * baseline + 0.1 * reward
            advantage = reward - baseline
            weights = [w + args.lr * advantage * g for w, g in zip(weights, grad)]
            if (episode + 1) % 20 == 0:
                print(f"episode {episode + 1}: reward {reward:+.3f}, running mean {baseline:+.3f}")

        learned, uniform = [], []
        for k in range(args.test_clusters):
            env = env_for(900_000 + k)  # never drawn in training (here or by training/)
            flat = [0.0] * len(weights)
            mine = [run_episode(env, weights, draw)[0] for _ in range(args.test_episodes)]
            rand = [run_episode(env, flat, draw)[0] for _ in range(args.test_episodes)]
            learned.append(statistics.mean(mine))
            uniform.append(statistics.mean(rand))
            print(f"unseen cluster {k}: learned {learned[-1]:+.3f}, uniform {uniform[-1]:+.3f}")
    wins = sum(a > b for a, b in zip(learned, uniform))
    print(f"mean reward on {len(learned)} unseen clusters: learned {statistics.mean(learned):+.3f}, "
          f"uniform random {statistics.mean(uniform):+.3f}; learned ahead on {wins}")


if __name__ == "__main__":
    main()
