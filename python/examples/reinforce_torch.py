"""A small graph policy in PyTorch, learned on the placement environment by REINFORCE on random
clusters, then judged on clusters it never saw against uniformly random actions. CPU only, a
few minutes; needs torch (numpy and gymnasium are not needed).

    python python/examples/reinforce_torch.py --train-clusters 4 --episodes 1500 --test-clusters 10

The network reads the observation the shipped GNN reads: op-group and device-group node
features, one round of mean message passing along the op→op and device↔device edges (with their
features), then scores each of the tree's actions from the deciding op group's embedding, the
mean embedding of the device groups the action uses, the share it uses and the replication
option. Nothing in it depends on the cluster's size, so one network serves every cluster.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
from pathlib import Path

import torch
import torch.nn as nn

import topoplace as tp

OPTIONS = 4


def tensor(rows) -> torch.Tensor:
    return torch.as_tensor(rows, dtype=torch.float32)


class GraphPolicy(nn.Module):
    def __init__(self, op_width: int, dev_width: int, edge_width: int, hidden: int = 32) -> None:
        super().__init__()
        self.op_in = nn.Sequential(nn.Linear(op_width, hidden), nn.ReLU())
        self.dev_in = nn.Sequential(nn.Linear(dev_width, hidden), nn.ReLU())
        self.op_message = nn.Linear(hidden + edge_width, hidden)
        self.dev_message = nn.Linear(hidden + edge_width, hidden)
        self.score = nn.Sequential(nn.Linear(2 * hidden + 1 + OPTIONS, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    @staticmethod
    def mean_messages(h, src, dst, features, layer):
        """Mean over incoming edges of layer([h[src], edge features]), zero where none arrive."""
        if len(src) == 0:
            return torch.zeros_like(h)
        src, dst = torch.as_tensor(src), torch.as_tensor(dst)
        messages = torch.relu(layer(torch.cat([h[src], tensor(features)], dim=1)))
        total = torch.zeros_like(h).index_add_(0, dst, messages)
        count = torch.zeros(len(h)).index_add_(0, dst, torch.ones(len(dst))).clamp(min=1)
        return total / count[:, None]

    def forward(self, obs: dict, slices: torch.Tensor, options: torch.Tensor) -> torch.Tensor:
        """Logits over every action at this vertex."""
        ops = self.op_in(tensor(obs["op_features"]))
        devs = self.dev_in(tensor(obs["dev_features"]))
        ops = ops + self.mean_messages(ops, obs["op_op_src"], obs["op_op_dst"], obs["op_op_features"], self.op_message)
        devs = devs + self.mean_messages(devs, obs["dev_dev_src"], obs["dev_dev_dst"], obs["dev_dev_features"],
                                         self.dev_message)
        used = slices.sum(dim=1, keepdim=True)
        pooled = slices @ devs / used.clamp(min=1)
        group = ops[obs["group"]].expand(len(slices), -1)
        share = used / slices.shape[1]
        return self.score(torch.cat([group, pooled, share, options], dim=1)).squeeze(1)


def action_tensors(env: tp.PlacementEnv):
    slices = tensor([placement for placement, _ in env.slices])
    options = nn.functional.one_hot(torch.as_tensor([o for _, o in env.slices]), OPTIONS).float()
    return slices, options


def run_episode(env, policy, tensors, generator, greedy=False):
    """One episode; returns (reward, sum of log-probabilities, sum of entropies). ``policy``
    None takes uniformly random actions."""
    observation, _ = env.reset()
    log_prob, entropy = torch.zeros(()), torch.zeros(())
    done, reward = False, 0.0
    while not done:
        if policy is None:
            logits = torch.zeros(len(env.slices))
        else:
            logits = policy(observation, *tensors)
        dist = torch.distributions.Categorical(logits=logits)
        action = logits.argmax() if greedy else torch.multinomial(dist.probs, 1, generator=generator)[0]
        log_prob = log_prob + dist.log_prob(action)
        entropy = entropy + dist.entropy()
        observation, reward, done, _, _ = env.step(int(action))
    return reward, log_prob, entropy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="vgg19")
    parser.add_argument("--groups", type=int, default=16)
    parser.add_argument("--train-clusters", type=int, default=4)
    parser.add_argument("--episodes", type=int, default=1500)
    parser.add_argument("--test-clusters", type=int, default=10)
    parser.add_argument("--test-episodes", type=int, default=10)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--entropy", type=float, default=0.01, help="weight of the entropy bonus")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    order = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        def env_for(seed: int) -> tp.PlacementEnv:
            cluster = tp.random_topology(seed, Path(tmp) / f"c{seed}.toml")
            return tp.PlacementEnv(args.model, cluster, groups=args.groups)

        train = [env_for(100_000 + k) for k in range(args.train_clusters)]
        first, _ = train[0].reset()
        policy = GraphPolicy(len(first["op_features"][0]), len(first["dev_features"][0]),
                             len(first["op_op_features"][0]))
        optimiser = torch.optim.Adam(policy.parameters(), lr=args.lr)
        tensors = [action_tensors(env) for env in train]
        baselines: list = [None] * len(train)  # one running mean per cluster: their scales differ
        for episode in range(args.episodes):
            k = order.randrange(len(train))
            reward, log_prob, entropy = run_episode(train[k], policy, tensors[k], generator)
            baselines[k] = reward if baselines[k] is None else 0.9 * baselines[k] + 0.1 * reward
            loss = -(reward - baselines[k]) * log_prob - args.entropy * entropy
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            if (episode + 1) % 50 == 0:
                shown = ", ".join(f"{b:+.3f}" for b in baselines if b is not None)
                print(f"episode {episode + 1}: running mean reward by cluster {shown}", flush=True)

        learned, greedy, uniform = [], [], []
        with torch.no_grad():
            for k in range(args.test_clusters):
                env = env_for(900_000 + k)  # never drawn in training (here or by training/)
                both = action_tensors(env)
                mine = [run_episode(env, policy, both, generator)[0] for _ in range(args.test_episodes)]
                rand = [run_episode(env, None, both, generator)[0] for _ in range(args.test_episodes)]
                learned.append(statistics.mean(mine))
                uniform.append(statistics.mean(rand))
                greedy.append(run_episode(env, policy, both, generator, greedy=True)[0])
                print(f"unseen cluster {k}: learned {learned[-1]:+.3f} (greedy {greedy[-1]:+.3f}), "
                      f"uniform {uniform[-1]:+.3f}", flush=True)
    wins = sum(a > b for a, b in zip(learned, uniform))
    print(f"mean reward on {len(learned)} unseen clusters: learned {statistics.mean(learned):+.3f} "
          f"(greedy {statistics.mean(greedy):+.3f}), uniform random {statistics.mean(uniform):+.3f}; "
          f"learned ahead on {wins}")


if __name__ == "__main__":
    main()
