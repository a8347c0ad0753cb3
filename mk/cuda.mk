# CUDA: compiled whenever nvcc exists (on PATH or /usr/local/cuda/bin), also
# on machines with no GPU.  `make NVCC=false` (or any NVCC that does not run)
# builds without CUDA: core/backend/cuda/engine_cuda.c then takes its no-CUDA branch.
#
# Every kernels/cuda/*.cu (device code and its launchers) and every .cu under
# core/ (host code that needs nvcc: the tensor backend's cuSPARSE and device
# vectors, core/backend/tensor/tensor_gpu.cu) becomes one object in
# libreconcore.a (release and ASan share them: device code is not
# instrumented).  Code: sm_90 SASS for Hopper (H100/H200) plus compute_90
# PTX, which the driver JIT-compiles for any newer GPU.  GPUs older than
# compute capability 9.0 cannot run PTX of a newer target: add a -gencode
# line (e.g. arch=compute_80,code=sm_80) with CUDA_GENCODE to support them.

NVCC ?= $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
HAVE_NVCC := $(if $(NVCC),$(shell $(NVCC) --version >/dev/null 2>&1 && echo 1))

ifeq ($(HAVE_NVCC),1)
CUDA_HOME    ?= $(realpath $(dir $(realpath $(shell command -v $(NVCC))))..)
CUDA_GENCODE ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
NVCCFLAGS    ?= -O3 -std=c++17 $(CUDA_GENCODE) -Xcompiler -fPIC -Xcompiler -Wall \
                -Xcompiler -Wextra -Werror all-warnings -lineinfo
CUDA_SRC     := $(wildcard kernels/cuda/*.cu) $(sort $(shell find core -name '*.cu'))
CUDA_OBJS    := $(patsubst %.cu,$(BUILD)/cuda/%.o,$(CUDA_SRC))
EXTRA_CORE_OBJS += $(CUDA_OBJS)
CPPFLAGS     += -DRC_HAVE_CUDA=1 -I$(CUDA_HOME)/include
CUDA_LDLIBS  := -L$(CUDA_HOME)/lib64 -lcudart -lcusparse -Wl,-rpath,$(CUDA_HOME)/lib64 -lstdc++
LDLIBS       += $(CUDA_LDLIBS)
CORE_LDLIBS  += $(CUDA_LDLIBS)

$(BUILD)/cuda/%.o: %.cu $(wildcard kernels/cuda/*.cuh core/backend/*/*.cuh) core/backend/cuda/cuda_kernels.h \
                  core/backend/elementwise_ops.h $(GEN_HEADERS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -DRC_HAVE_CUDA=1 -Icore -Ikernels/cuda -I$(BUILD)/gen -c $< -o $@
endif
