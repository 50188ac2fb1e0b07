"""The Python package against the command line: the same numbers on the same instances, the
same strategies, and bad input raised as exceptions naming the file and field."""

from __future__ import annotations

import json

import pytest

import topoplace as tp
from helpers import cli, cli_json


def test_the_readme_example_gives_the_main_commands_time():
    placed = tp.place("vgg19", "tag-testbed", progress=False)
    shown = cli("place", "--model", "vgg19", "--cluster", "tag-testbed")
    assert shown.returncode == 0, shown.stderr
    first = next(l for l in shown.stdout.splitlines() if l.startswith("iteration time"))
    assert first.split()[2] == f"{placed.iteration_ms:.3f}"


@pytest.mark.parametrize(
    "model,cluster,extra",
    [
        ("bert-small", "tag-cloud", ["--budget", "40", "--seed", "3"]),
        ("resnet50", "tag-testbed", ["--budget", "30", "--policy", "none"]),
    ],
)
def test_place_gives_the_cli_numbers(model, cluster, extra):
    kwargs = {"budget": int(extra[1])}
    if "--seed" in extra:
        kwargs["seed"] = int(extra[extra.index("--seed") + 1])
    if "--policy" in extra:
        kwargs["policy"] = extra[extra.index("--policy") + 1]
    placed = tp.place(model, cluster, progress=False, **kwargs)
    expected = cli_json("place", "--model", model, "--cluster", cluster, *extra)
    for key in ["iteration_us", "best_heuristic", "best_heuristic_us", "peak_memory_bytes",
                "iterations", "simulated", "groups"]:
        assert placed[key] == expected[key], key


@pytest.mark.parametrize(
    "model,cluster,strategy,extra",
    [
        ("vgg19", "tag-testbed", "dp", []),
        ("bert-large", "tag-cloud", "dp-p", ["--precision", "fp32"]),
        ("resnet50", "hetero-a100-v100", "single", ["--precision", "fp16", "--framework", "pytorch"]),
    ],
)
def test_simulate_gives_the_cli_numbers(model, cluster, strategy, extra):
    kwargs = {}
    for flag in ["--precision", "--framework"]:
        if flag in extra:
            kwargs[flag[2:]] = extra[extra.index(flag) + 1]
    sim = tp.simulate(model, cluster, strategy, **kwargs)
    expected = cli_json("simulate", "--model", model, "--cluster", cluster,
                        "--strategy", strategy, *extra)
    assert sim.to_dict() == expected
    assert sim.iteration_ms == pytest.approx(expected["iteration_us"] / 1e3, rel=1e-12)


def test_a_placed_strategy_round_trips_and_simulates_to_its_time(tmp_path):
    placed = tp.place("vgg19", "tag-testbed", budget=20, progress=False)
    path = placed.strategy.save(tmp_path / "s.json")
    again = tp.Strategy.load(path)
    assert again.to_dict() == placed.strategy.to_dict()
    from_object = tp.simulate("vgg19", "tag-testbed", again)
    from_file = cli_json("simulate", "--model", "vgg19", "--cluster", "tag-testbed",
                         "--strategy", str(path))
    assert from_object.iteration_us == from_file["iteration_us"]
    assert from_object.iteration_us == pytest.approx(placed.iteration_us, rel=1e-9)


def test_compare_gives_the_cli_rows(tmp_path):
    rows = tp.compare("vgg19", "tag-testbed", ["dp-subset", "pipeline-dp", "horovod"],
                      progress=False, out=tmp_path / "py")
    expected = cli_json("compare", "--models", "vgg19", "--clusters", "tag-testbed",
                        "--methods", "dp-subset,pipeline-dp,horovod",
                        "--out", str(tmp_path / "cli"))
    assert [r.method for r in rows] == [r["method"] for r in expected]
    for row, want in zip(rows, expected):
        assert row.iteration_ms == want["iteration_ms"], row.method
        assert row.peak_memory_gib == want["peak_memory_gib"], row.method
    assert (tmp_path / "py" / "results.csv").exists()


def test_a_hybrid_plan_simulates_as_the_cli_does(tmp_path):
    plan = {
        "global_batch": 64,
        "micro_batches": 8,
        "stages": [
            {"layers": [0, 16], "replicas": [[0, 1, 2, 3]], "zero": "1"},
            {"layers": [16, 32], "replicas": [[4, 5, 6, 7]], "zero": "1"},
        ],
    }
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    expected = cli_json("simulate", "--model", "llama-7b", "--cluster", "hetero-a100-v100",
                        "--plan", str(path), "--precision", "fp16", "--framework", "pytorch")
    sim = tp.simulate("llama-7b", "hetero-a100-v100", plan=tp.Strategy.load(path),
                      precision="fp16", framework="pytorch")
    assert sim.to_dict() == expected
    assert sim.fits == expected["fits"]


def test_memory_format_prices_the_nchw_transposes_in_16_bits():
    # PyTorch's default NCHW layout transposes every 16-bit convolution's tensors for the tensor
    # cores; channels-last does not; FP32 convolutions pay nothing either way.
    def ms(precision, **kw):
        return tp.simulate("resnet50", "hetero-h100-a100", "single", batch=32,
                           precision=precision, framework="pytorch", **kw).iteration_ms
    nchw = ms("bf16")
    assert ms("bf16", memory_format="nchw") == nchw
    assert nchw > 1.1 * ms("bf16", memory_format="channels-last")
    assert ms("fp32", memory_format="nchw") == ms("fp32", memory_format="channels-last")


# Bad input: an exception naming the file (or argument) and the field, never a crash.

def test_an_unknown_model_names_it():
    with pytest.raises(tp.InputError) as e:
        tp.simulate("no-such-model", "tag-testbed")
    assert "no-such-model" in str(e.value)


def test_an_unknown_cluster_is_the_cluster_argument():
    with pytest.raises(tp.InputError) as e:
        tp.place("vgg19", "no-such-cluster", progress=False)
    assert e.value.file == "<argument>" and e.value.field == "cluster"


def test_a_bad_cluster_file_names_the_file_and_field(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\n[[machine]]\ngpu = "V100"\ngpus = -1\n')
    with pytest.raises(tp.InputError) as e:
        tp.simulate("vgg19", bad)
    assert e.value.file == str(bad)
    assert e.value.field


def test_a_strategy_for_another_model_is_refused(tmp_path):
    placed = tp.place("vgg19", "tag-testbed", budget=5, progress=False)
    path = placed.strategy.save(tmp_path / "vgg.json")
    with pytest.raises(tp.InputError) as e:
        tp.simulate("resnet50", "tag-testbed", path)
    # Its op groups do not match resnet50's ops: the file and the field are named.
    assert e.value.file == str(path) and e.value.field in ("model", "groups")


def test_a_malformed_strategy_file_names_itself(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"model": "vgg19", "cluster": ')
    with pytest.raises(tp.InputError) as e:
        tp.simulate("vgg19", "tag-testbed", path)
    assert e.value.file == str(path)


@pytest.mark.parametrize(
    "call,field",
    [
        (lambda: tp.simulate("vgg19", "tag-testbed", precision="fp8"), "precision"),
        (lambda: tp.simulate("bert-small", "tag-testbed", seq=0), "seq"),
        (lambda: tp.place("vgg19", "tag-testbed", budget=0), "budget"),
        (lambda: tp.place("vgg19", "tag-testbed", time=-1.0), "time"),
        (lambda: tp.place("vgg19", "tag-testbed", planner="hybrid"), "planner"),
        (lambda: tp.compare("vgg19", "tag-testbed", "no-such-method"), "methods"),
        (lambda: tp.simulate("vgg19", "tag-testbed", order="random"), "order"),
        (lambda: tp.simulate("vgg19", "tag-testbed", memory_format="nhcw"), "memory_format"),
        # Conversion errors of the native layer named no argument.
        (lambda: tp.place("vgg19", "tag-testbed", budget=-1), "budget"),
        (lambda: tp.place("vgg19", "tag-testbed", seed=2**64), "seed"),
        (lambda: tp.place("vgg19", "tag-testbed", batch=2**40), "batch"),
        (lambda: tp.place("vgg19", "tag-testbed", budget=None), "budget"),
        (lambda: tp.place("vgg19", "tag-testbed", time="1"), "time"),
        # The command line refuses these; they were ignored or turned into something else.
        (lambda: tp.place("vgg19", "tag-testbed", groups=0), "groups"),
        (lambda: tp.place("vgg19", "tag-testbed", policy=None), "policy"),
        (lambda: tp.place("vgg19", "tag-testbed", out="x.json", trace="x.json"), "trace"),
        (lambda: tp.simulate("gpt", "tag-testbed", plan=tp.Strategy({}), trace="t.json"), "trace"),
        (lambda: tp.simulate("vgg19", "tag-testbed", order="priority"), "order"),
        (lambda: tp.compare([], "tag-testbed"), "models"),
        (lambda: tp.compare("vgg19", b"tag-testbed"), "clusters"),
        (lambda: tp.Strategy.from_json("[1, 2]"), ""),
        (lambda: tp.Strategy.from_json('{"x": NaN}'), ""),
    ],
)
def test_a_bad_argument_names_it(call, field):
    with pytest.raises(tp.InputError) as e:
        call()
    assert e.value.file == "<argument>" and e.value.field == field, str(e.value)


def test_results_copy_and_pickle():
    import copy
    import pickle

    simulated = tp.simulate("mlp", "tag-testbed")
    assert copy.deepcopy(simulated).to_dict() == simulated.to_dict()
    assert pickle.loads(pickle.dumps(simulated)).iteration_ms == simulated.iteration_ms


def test_an_environment_takes_whole_actions_in_range_after_reset():
    env = tp.PlacementEnv("mlp", "tag-testbed", groups=2)
    with pytest.raises(RuntimeError):
        env.step(0)
    env.reset()
    for bad in (1.7, "0", True, -1, 2**64):
        with pytest.raises(tp.InputError) as e:
            env.step(bad)
        assert e.value.field == "action", bad
    with pytest.raises(tp.InputError) as e:
        env.reset(seed="x")
    assert e.value.field == "seed"


def test_a_model_that_fits_nowhere_raises_does_not_fit(tmp_path):
    one_gpu = tmp_path / "one.toml"
    one_gpu.write_text(
        'name = "one-small-gpu"\n[[machine]]\nname = "box"\ngpu = "GTX-1080Ti"\ngpus = 1\n'
        'intra_bandwidth = "12 GB/s"\nnic = "10 Gbps"\n'
    )
    with pytest.raises(tp.DoesNotFitError) as e:
        tp.place("bert-large", one_gpu, batch=256, budget=5, progress=False)
    assert "does not fit on one-small-gpu" in str(e.value)


def test_an_unwritable_output_is_refused_before_the_search(tmp_path):
    (tmp_path / "a-file").write_text("")
    with pytest.raises(tp.TopoplaceError) as e:
        tp.place("vgg19", "tag-testbed", out=tmp_path / "a-file" / "s.json", progress=False)
    assert "a-file" in str(e.value)


def test_it_imports_without_torch():
    """Importing the package never imports torch (a fresh interpreter: the torch-marked tests
    import it into this one where it is installed)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", "import sys, topoplace; print('torch' in sys.modules)"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


# Clusters as TOML text and from nvidia-smi.

TWO_MACHINES = """name = "two-boxes"
[[machine]]
name = "a"
gpu = "V100-32GB"
gpus = 2
intra_bandwidth = "50 GB/s"
nic = "10 Gbps"
[[machine]]
name = "b"
gpu = "P100-16GB"
gpus = 2
intra_bandwidth = "12 GB/s"
nic = "10 Gbps"
"""


def test_a_cluster_given_as_toml_text_is_the_file(tmp_path):
    path = tmp_path / "two-boxes.toml"
    path.write_text(TWO_MACHINES)
    from_text = tp.simulate("bert-small", TWO_MACHINES, "dp")
    assert from_text.to_dict() == tp.simulate("bert-small", path, "dp").to_dict()
    rows = tp.compare("bert-small", [TWO_MACHINES], "dp-subset", progress=False)
    assert [r.cluster for r in rows] == ["two-boxes"]
    env = tp.PlacementEnv("mlp", TWO_MACHINES, groups=2)
    assert env.reset()[1]["dp_us"] > 0


def test_bad_toml_text_is_named_as_such():
    with pytest.raises(tp.InputError) as e:
        tp.simulate("vgg19", TWO_MACHINES.replace("gpus = 2", "gpus = -2", 1))
    assert e.value.file == "<cluster text>" and "gpus" in e.value.field


DGX1 = "\tGPU0\tGPU1\tCPU Affinity\n" + "\n".join([
    "GPU0 X NV1 NV1 NV2 NV2 SYS SYS SYS",
    "GPU1 NV1 X NV2 NV1 SYS NV2 SYS SYS",
    "GPU2 NV1 NV2 X NV2 SYS SYS NV1 SYS",
    "GPU3 NV2 NV1 NV2 X SYS SYS SYS NV1",
    "GPU4 NV2 SYS SYS SYS X NV1 NV1 NV2",
    "GPU5 SYS NV2 SYS SYS NV1 X NV2 NV1",
    "GPU6 SYS SYS NV1 SYS NV1 NV2 X NV2",
    "GPU7 SYS SYS SYS NV1 NV2 NV1 NV2 X",
]) + "\n"


def test_an_nvidia_smi_machine_is_the_cli_one(tmp_path):
    topo = tmp_path / "topo.txt"
    topo.write_text(DGX1)
    shown = cli("topology", "nvidia-smi", "--gpu", "V100-16GB", str(topo))
    assert shown.returncode == 0, shown.stderr
    machine = tp.nvidia_smi_machine(DGX1, "V100-16GB")
    assert machine.strip() == shown.stdout.strip()
    sim = tp.simulate("resnet50", 'name = "dgx1"\n' + machine, "dp")
    assert len(sim.devices) == 8
    with pytest.raises(tp.InputError) as e:
        tp.nvidia_smi_machine("not a topology", "V100-16GB")
    assert e.value.field == "topo"
    with pytest.raises(tp.InputError) as e:
        tp.nvidia_smi_machine(DGX1, "no-such-gpu")
    assert e.value.file == "<argument>" and e.value.field == "gpu"
    # A GPU without NVLink on a topology of NVLink links, and an empty name, as the CLI refuses.
    with pytest.raises(tp.InputError) as e:
        tp.nvidia_smi_machine(DGX1, "T4")
    assert e.value.field == "gpu"
    with pytest.raises(tp.InputError) as e:
        tp.nvidia_smi_machine(DGX1, "V100-16GB", name=" ")
    assert e.value.field == "name"


def test_ctrl_c_stops_a_long_call_and_its_worker_at_once():
    import signal
    import subprocess
    import sys
    import time

    # A search that would run for a minute, interrupted after it has started. The child takes
    # Python's own SIGINT handler: one started in the background by a shell without job control
    # inherits SIGINT ignored, and would run the search to its limit.
    script = (
        "import signal\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "import topoplace as tp\n"
        "print('started', flush=True)\n"
        "try:\n"
        "    tp.place('bert-large', 'tag-cloud', budget=10**6, time=60, progress=False)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n"
        "import time\n"
        "time.sleep(3)\n"
        "used = time.process_time()\n"
        "time.sleep(2)\n"
        "print('cpu', time.process_time() - used, flush=True)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "started"
    time.sleep(3)
    sent = time.monotonic()
    child.send_signal(signal.SIGINT)
    assert child.stdout.readline().strip() == "interrupted"
    assert time.monotonic() - sent < 5, "KeyboardInterrupt came within 0.1 s polls, not at the end"
    out, _ = child.communicate(timeout=30)
    # the abandoned search stopped too (within the piece of work it was in, given 3 s): two
    # idle seconds then cost almost no CPU, where a search running on to its 60 s would burn
    # about two seconds of it on each core
    cpu = float(out.split("cpu")[1])
    assert cpu < 0.3, f"the worker ran on after Ctrl-C: {cpu:.2f} s of CPU in 2 s"
