# make gpu-proof (docs/cuda.md, "make gpu-proof"): on a machine with an
# NVIDIA GPU, builds for its architecture in build/gpu-proof-smXY, runs the
# GPU tests and the benchmarks and prints one table of every figure beside
# its floor and target (scripts/gpu-proof.sh, capped at RECOND_GPU_PROOF_LIMIT, 540 s, meant to fit 8 minutes on an H100
# or H200).  Without a GPU: "no CUDA device", exit 77.
# RECOND_GPU_PROOF_EMU=1 rehearses every step on tools/cuda-emu.
.PHONY: gpu-proof
gpu-proof:
	@bash scripts/gpu-proof.sh
