"""The step timeline's reading of a profiler trace (benchmarks/step_timeline.py): GPU busy and idle time inside each
marked step, counted once where streams overlap, and what the host was doing in CUDA while the GPU stood idle."""

from __future__ import annotations

from benchmarks.step_timeline import analyze, summary


def _ev(cat: str, name: str, ts: float, dur: float, **args: object) -> dict[str, object]:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 0, "tid": 0, "args": args}


def test_idle_time_gaps_and_the_host_s_waits_inside_a_marked_step():
    trace = {"traceEvents": [
        _ev("user_annotation", "step 1", 1000, 10_000),
        _ev("kernel", "mul_mat_q", 500, 1500, stream=7),  # began before the step: only 1000 µs count
        _ev("kernel", "flash_attn", 2000, 2000, stream=7),
        _ev("kernel", "clip_gemm", 3000, 2000, stream=9),  # overlaps the one above on another stream
        _ev("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 8000, 500, stream=7, bytes=10_000_000),
        _ev("cuda_runtime", "cudaStreamSynchronize", 5200, 2700),  # the host waits through the gap
        _ev("cuda_runtime", "cudaLaunchKernel", 1900, 50),
        _ev("kernel", "outside", 20_000, 100, stream=7),  # after the step
        _ev("user_annotation", "prefetch", 0, 50_000),  # not a step mark
    ]}
    (step,) = analyze(trace)
    assert step["step"] == "step 1"
    assert step["wall_ms"] == 10.0
    assert step["gpu_busy_ms"] == 1.0 + 3.0 + 0.5  # 1000..2000, 2000..5000 (two streams), 8000..8500
    assert step["gpu_idle_ms"] == 10.0 - 4.5
    gaps = step["largest_gaps"]
    assert [round(g["ms"], 2) for g in gaps] == [3.0, 2.5]  # 5000..8000, then 8500..11000 (to the step's end)
    assert gaps[0]["after"] == "clip_gemm" and gaps[0]["before"].startswith("Memcpy HtoD")
    assert gaps[0]["host_in_cuda"] == "cudaStreamSynchronize 2.7 ms"
    assert gaps[1]["before"] == "(step end)" and gaps[1]["host_in_cuda"].startswith("no CUDA call")
    assert step["streams_busy_ms"] == {"7": 1.0 + 2.0 + 0.5, "9": 2.0}
    assert step["copies"] == [{"kind": "Memcpy HtoD (Pageable -> Device)", "n": 1, "ms": 0.5, "MB": 10.0}]
    assert step["host_waits"] == [{"call": "cudaStreamSynchronize", "n": 1, "ms": 2.7}]
    assert step["kernel_launches"] == 3
    assert "| step 1 | 10.0 | 4.5 | 5.5 |" in summary([step], "t")


def test_the_cupti_collector_s_lines_read_as_the_same_events(tmp_path):
    from benchmarks.step_timeline import read_cupti

    tsv = tmp_path / "trace.tsv"
    tsv.write_text("\n".join([
        "M\t1000000\t11000000\t0\tstep 1",
        "K\t1000000\t2000000\t7\tmul_mat_q<Q4_K>",
        "C\t2000000\t2500000\t7\t10000000\t1.1.3",  # HtoD, from pageable memory to the device
        "S\t2500000\t2600000\t7\t4096",
        "R\t3000000\t9000000\t4242\tcudaStreamSynchronize_v3020",
        "D\t3000000\t3000500\t4242\tcuLaunchKernel",
        "X\tnot a line this reader knows",
    ]) + "\n", encoding="utf-8")
    events = read_cupti(tsv)
    assert [e["cat"] for e in events] == ["user_annotation", "kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime",
                                          "cuda_driver"]
    (step,) = analyze(events)
    assert step["wall_ms"] == 10.0 and step["gpu_busy_ms"] == 1.6
    assert step["copies"][0]["kind"] == "Memcpy HtoD (pageable -> device)" and step["copies"][0]["MB"] == 10.0
    assert step["host_waits"] == [{"call": "cudaStreamSynchronize_v3020", "n": 1, "ms": 6.0}]
    assert step["largest_gaps"][0]["host_in_cuda"].startswith("cudaStreamSynchronize_v3020 6.0 ms")
