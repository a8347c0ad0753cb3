# OpenCL kernels embedded at build time: kernels/opencl/*.cl become C string
# literals in $(BUILD)/gen/rc_opencl_kernels.h (common.cl first), so the
# binaries need no kernel files at run time.  engine_opencl.c includes it.
# The runtime compiler has no files to include: a line `#include "x"` of a
# .cl file is replaced by core/x (OPENCL_INC; elementwise.cl's formulas,
# core/backend/elementwise_ops.h), so the .cl stays valid OpenCL with -Icore.
OPENCL_CL := kernels/opencl/common.cl $(filter-out kernels/opencl/common.cl,$(sort $(wildcard kernels/opencl/*.cl)))
OPENCL_INC := core/backend/elementwise_ops.h
OPENCL_GEN := $(BUILD)/gen/rc_opencl_kernels.h
GEN_HEADERS += $(OPENCL_GEN)

$(OPENCL_GEN): $(OPENCL_CL) $(OPENCL_INC) mk/opencl.mk
	@mkdir -p $(@D)
	@{ echo "/* generated from the .cl files of kernels/opencl by mk/opencl.mk: do not edit */"; \
	  echo "static const char *const rc_opencl_sources[] = {"; \
	  for f in $(OPENCL_CL); do \
	    echo "/* $$f */"; \
	    awk 'match($$0, /^#include "[^"]*"/) { p = "core/" substr($$0, 11, RLENGTH - 11); \
	           while ((r = (getline l < p)) > 0) print l; \
	           if (r < 0) { print FILENAME ": cannot include " p > "/dev/stderr"; exit 1 } \
	           close(p); next } { print }' $$f > $@.cl || exit 1; \
	    sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $@.cl; \
	    echo ","; \
	  done; \
	  rm -f $@.cl; \
	  echo "};"; } > $@.tmp && mv $@.tmp $@
