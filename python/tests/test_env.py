"""The placement environment: an episode is the tree's decisions one op group at a time, and
it replays what the command line places and simulates exactly."""

from __future__ import annotations

import json
import random

import pytest

import topoplace as tp
from helpers import cli_json


def test_an_episode_replays_the_cli_placement_exactly(tmp_path):
    out = tmp_path / "placed.json"
    summary = cli_json("place", "--model", "vgg19", "--cluster", "tag-testbed", "--out", str(out))
    placed = json.loads(out.read_text())
    env = tp.PlacementEnv("vgg19", "tag-testbed", batch_split=placed["batch_split"],
                          allreduce=placed["allreduce"])
    action = {(tuple(d), o): i for i, (d, o) in enumerate(env.actions)}
    env.reset()
    assert len(summary["groups"]) == env.groups
    for group in sorted(summary["groups"], key=lambda g: g["group"]):
        _, reward, done, _, info = env.step(action[(tuple(group["devices"]), group["option"])])
    assert done
    assert info["iteration_us"] == summary["iteration_us"]
    assert env.strategy().to_dict() == placed
    # The reward is the search's: DP-NCCL's time over the strategy's, less one.
    assert reward == pytest.approx(summary["dp_nccl_us"] / summary["iteration_us"] - 1, rel=1e-12)


def test_an_all_data_parallel_episode_is_dp_nccl():
    env = tp.PlacementEnv("resnet50", "tag-cloud", allreduce="packed")
    dp = cli_json("simulate", "--model", "resnet50", "--cluster", "tag-cloud", "--strategy", "dp")
    _, info = env.reset()
    assert info["dp_us"] == dp["iteration_us"]
    done = False
    while not done:
        _, reward, done, truncated, info = env.step(0)
        assert not truncated
    assert info["iteration_us"] == dp["iteration_us"] and reward == 0.0


def test_a_random_episode_simulates_as_its_strategy_file(tmp_path):
    env = tp.PlacementEnv("bert-small", "tag-testbed", groups=8)
    draw = random.Random(7)
    observation, _ = env.reset()
    for step in range(env.groups):
        assert observation["group"] == step
        observation, reward, done, _, info = env.step(draw.randrange(len(env.actions)))
    assert done and env.choice and len(env.choice) == env.groups
    path = env.strategy().save(tmp_path / "episode.json")
    simulated = cli_json("simulate", "--model", "bert-small", "--cluster", "tag-testbed",
                         "--strategy", str(path))
    assert simulated["iteration_us"] == info["iteration_us"]
    assert (reward == -1.0) == (not info["fits"])


def test_the_observation_is_the_gnn_graph():
    env = tp.PlacementEnv("vgg19", "tag-testbed", groups=6)
    observation, _ = env.reset()
    ops, devs = observation["op_features"], observation["dev_features"]
    assert len(ops) == env.groups == 6 and all(len(row) == 14 for row in ops)
    assert len(devs) == 7 and all(len(row) == 6 for row in devs)  # tag-testbed's device groups
    for edges, sources, targets in [("op_op", 6, 6), ("dev_dev", 7, 7), ("op_dev", 6, 7)]:
        src, dst = observation[f"{edges}_src"], observation[f"{edges}_dst"]
        assert len(src) == len(dst) == len(observation[f"{edges}_features"])
        assert all(0 <= s < sources for s in src) and all(0 <= d < targets for d in dst)
    assert len(env.slices) == len(env.actions)
    assert all(len(placement) == 7 for placement, _ in env.slices)


def test_a_bad_action_or_a_step_past_the_end_names_it():
    env = tp.PlacementEnv("mlp", "tag-testbed", groups=2)
    env.reset()
    with pytest.raises(tp.InputError) as e:
        env.step(len(env.actions))
    assert e.value.field == "action"
    env.step(0)
    env.step(0)
    with pytest.raises(tp.InputError) as e:
        env.step(0)
    assert e.value.field == "step"
    with pytest.raises(tp.InputError) as e:
        tp.PlacementEnv("mlp", "tag-testbed", allreduce="sometimes")
    assert e.value.field == "allreduce"


def test_the_shipped_priors_score_every_action_at_the_vertex():
    env = tp.PlacementEnv("vgg19", "tag-testbed", groups=4)
    env.reset()
    first = env.priors()
    assert len(first) == len(env.actions)
    assert sum(first) == pytest.approx(1.0, abs=1e-4) and min(first) >= 0.0
    env.step(max(range(len(first)), key=first.__getitem__))
    assert env.priors() != first, "the next vertex has its own graph and priors"
    with pytest.raises(tp.InputError) as e:
        env.priors("none")
    assert e.value.field == "policy"
    for _ in range(env.groups - 1):
        env.step(0)
    with pytest.raises(tp.InputError):
        env.priors()


def test_a_random_topology_is_the_cli_one(tmp_path):
    from helpers import cli

    path = tp.random_topology(424242, tmp_path / "t.toml")
    shown = cli("topology", "random", "--seed", "424242")
    assert shown.returncode == 0 and path.read_text() == shown.stdout
    today = tp.random_topology(7, tmp_path / "today.toml", distribution="today")
    shown = cli("topology", "random", "--seed", "7", "--distribution", "today")
    assert shown.returncode == 0 and today.read_text() == shown.stdout
    assert "H100" in today.read_text() or "A100" in today.read_text()
    with pytest.raises(tp.InputError) as e:
        tp.random_topology(7, tmp_path / "bad.toml", distribution="2019")
    assert e.value.field == "distribution"
    assert not (tmp_path / "bad.toml").exists()
