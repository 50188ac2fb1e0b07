"""Type stubs of the native module; the documented API is the package's (``topoplace``)."""

from typing import Optional

__version__: str

def simulate(
    model: str,
    cluster: str,
    strategy: str = "dp",
    *,
    batch: Optional[int] = None,
    precision: str = "fp32",
    framework: str = "tf1",
    seq: Optional[int] = None,
    optimizer: Optional[str] = None,
    memory_format: Optional[str] = None,
    order: Optional[str] = None,
    plan: Optional[str] = None,
    trace: Optional[str] = None,
) -> str: ...
def place(
    model: str,
    cluster: str,
    *,
    batch: Optional[int] = None,
    precision: str = "fp32",
    framework: str = "tf1",
    seq: Optional[int] = None,
    optimizer: Optional[str] = None,
    memory_format: Optional[str] = None,
    policy: str = "shipped",
    budget: int = 300,
    time: Optional[float] = None,
    seed: int = 0,
    planner: str = "auto",
    groups: Optional[int] = None,
    pipeline_leaves: Optional[int] = None,
    batch_split: str = "even",
    group_order: str = "compute",
    out: Optional[str] = None,
    trace: Optional[str] = None,
    progress: bool = True,
) -> tuple[str, str]: ...
def compare(
    models: list[str],
    clusters: list[str],
    methods: str = "all",
    *,
    batch: Optional[int] = None,
    precision: str = "fp32",
    framework: str = "tf1",
    seq: Optional[int] = None,
    optimizer: Optional[str] = None,
    memory_format: Optional[str] = None,
    seed: int = 0,
    budget: int = 100,
    time_limit: Optional[float] = None,
    out: Optional[str] = None,
    progress: bool = True,
) -> str: ...
def shipped_clusters() -> list[str]: ...
def random_topology(seed: int, distribution: str = "tag") -> str: ...
def nvidia_smi_machine(text: str, gpu: str, name: str = "machine") -> str: ...

Edges = tuple[list[int], list[int], list[float], int]

class Environment:
    def __init__(
        self,
        model: str,
        cluster: str,
        *,
        groups: Optional[int] = None,
        batch: Optional[int] = None,
        precision: str = "fp32",
        framework: str = "tf1",
        seq: Optional[int] = None,
        optimizer: Optional[str] = None,
        memory_format: Optional[str] = None,
        batch_split: str = "even",
        allreduce: str = "auto",
    ) -> None: ...
    def reset(self) -> dict: ...
    def step(self, action: int) -> tuple[Optional[dict], float, float, bool]: ...
    def priors(self, policy: str = "shipped") -> list[float]: ...
    def strategy_json(self) -> str: ...
    @property
    def actions(self) -> list[tuple[list[int], str]]: ...
    @property
    def slices(self) -> list[tuple[list[float], int]]: ...
    @property
    def groups(self) -> int: ...
    @property
    def dp_us(self) -> float: ...
    @property
    def choice(self) -> list[int]: ...
