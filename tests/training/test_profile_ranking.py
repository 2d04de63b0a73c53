"""The profile's ranking of operators counts each kernel once: on made-up events, nested as the
profiler nests a CUDA run's (its own parser builds the same objects from Kineto's events)."""

from __future__ import annotations

from torch.autograd import DeviceType
from torch.autograd.profiler_util import EventList, FunctionEvent

from experiments.training.profiling import own_times

GPU_STREAM = 7  # the "thread" Kineto gives a GPU's events: its stream


def operator(
    number: int, name: str, start: float, end: float, kernel_us: float = 0
) -> FunctionEvent:
    """An operator on the host, holding the time of the kernel it launched (as the profiler's
    parser appends each kernel to the operator its launch is correlated with)."""
    event = FunctionEvent(
        number, name, thread=1, start_us=start, end_us=end, stack=[], use_device="cuda"
    )
    if kernel_us:
        event.append_kernel(f"{name} kernel", 0, kernel_us)
    return event


def on_the_gpu(
    number: int, name: str, start: float, end: float, annotation: bool = False
) -> FunctionEvent:
    """An event of the GPU's own: a kernel, a copy, or a span marked on it (ProfilerStep*)."""
    return FunctionEvent(
        number,
        name,
        thread=GPU_STREAM,
        start_us=start,
        end_us=end,
        stack=[],
        use_device="cuda",
        device_type=DeviceType.CUDA,
        is_user_annotation=annotation,
    )


def profiled_step() -> EventList:
    """One step: two linear layers (addmm under linear, 400 us of GEMM each), a relu (100 us)
    and a copy (50 us) on the host, and the same kernels again as the GPU's events, inside the
    step's span on each side."""
    events = EventList(
        [
            operator(1, "ProfilerStep*", 0, 1000),
            operator(2, "aten::linear", 10, 300),
            operator(3, "aten::addmm", 20, 290, kernel_us=400),
            operator(4, "aten::relu", 300, 400, kernel_us=100),
            operator(5, "aten::copy_", 400, 450, kernel_us=50),
            operator(6, "aten::linear", 460, 600),
            operator(7, "aten::addmm", 470, 590, kernel_us=400),
            on_the_gpu(8, "ProfilerStep*", 500, 1500, annotation=True),
            on_the_gpu(9, "sgemm", 500, 900),
            on_the_gpu(10, "relu kernel", 900, 1000),
            on_the_gpu(11, "Memcpy HtoD (Pinned -> Device)", 1000, 1050),
            on_the_gpu(12, "sgemm", 1050, 1450),
        ],
        use_device="cuda",
    )
    events._build_tree()  # what the profiler does before key_averages(): parents and children
    return events


def test_the_gpu_ranking_counts_each_kernel_once() -> None:
    ranked, total = own_times(profiled_step().key_averages(), on_gpu=True)
    assert ranked[:3] == [("aten::addmm", 800), ("aten::relu", 100), ("aten::copy_", 50)]
    assert dict(ranked)["aten::linear"] == 0  # its GEMMs are addmm's, not its own as well
    assert "sgemm" not in dict(ranked) and "ProfilerStep*" not in dict(ranked)
    # All the GPU ran (not the step's span over it), each kernel once: the ranking adds up to it.
    assert total == 400 + 100 + 50 + 400
    assert sum(took for _, took in ranked) == total


def test_the_cpu_ranking_counts_each_microsecond_of_the_host_once() -> None:
    ranked, total = own_times(profiled_step().key_averages(), on_gpu=False)
    # Each operator's time outside those it called; the GPU's events took none of the host's.
    assert ranked[:4] == [
        ("aten::addmm", 390),
        ("aten::relu", 100),
        ("aten::copy_", 50),
        ("aten::linear", 40),
    ]
    assert total == (300 - 10) + (400 - 300) + (450 - 400) + (600 - 460)  # the top-level operators
