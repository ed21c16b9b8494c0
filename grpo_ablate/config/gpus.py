"""Common data-centre GPUs, by the names `hardware.gpu_type` takes: what plan's GPU-hour estimate reads.

    python -c "from grpo_ablate.config.gpus import GPU_TYPES; print(GPU_TYPES['H20'])"

Only the two figures the estimate scales by: dense BF16 tensor throughput (training is bound by
compute) and memory bandwidth (decoding is bound by reading the weights and the KV cache). The
vendor's sheets print BF16 "with sparsity"; the dense figure is half of it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Gpu", "GPU_TYPES", "REFERENCE_GPU"]


@dataclass(frozen=True)
class Gpu:
    name: str
    bf16_tflops: float  # dense BF16 tensor-core peak
    bandwidth_tb_s: float  # HBM / GDDR bandwidth
    memory_gb: int
    source: str


GPU_TYPES: dict[str, Gpu] = {g.name: g for g in (
    Gpu("H100", 989.0, 3.35, 80, "NVIDIA H100 SXM5 datasheet, nvidia.com/en-us/data-center/h100 (1,979 TFLOPS BF16 with sparsity)"),
    Gpu("H200", 989.0, 4.8, 141, "NVIDIA H200 SXM datasheet, nvidia.com/en-us/data-center/h200 (1,979 TFLOPS BF16 with sparsity)"),
    Gpu("H20", 148.0, 4.0, 96, "NVIDIA HGX H20 as reported from its product brief (148 TFLOPS BF16 dense, 4.0 TB/s, 96 GB HBM3); "
                               "no public nvidia.com datasheet"),
    Gpu("A100", 312.0, 2.039, 80, "NVIDIA A100 80GB SXM datasheet, nvidia.com/en-us/data-center/a100 (624 TFLOPS BF16 with sparsity)"),
    Gpu("L40S", 362.0, 0.864, 48, "NVIDIA L40S datasheet, nvidia.com/en-us/data-center/l40s (733 TFLOPS BF16 with sparsity)"),
)}

# The GPU the estimate's unqualified rates are quoted for (hardware.gpu_type unset).
REFERENCE_GPU = GPU_TYPES["H100"]
