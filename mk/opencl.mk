# OpenCL kernels embedded at build time: kernels/opencl/*.cl become C string
# literals in $(BUILD)/gen/rc_opencl_kernels.h (common.cl first), so the
# binaries need no kernel files at run time.  engine_opencl.c includes it.
OPENCL_CL := kernels/opencl/common.cl $(filter-out kernels/opencl/common.cl,$(sort $(wildcard kernels/opencl/*.cl)))
OPENCL_GEN := $(BUILD)/gen/rc_opencl_kernels.h
GEN_HEADERS += $(OPENCL_GEN)

$(OPENCL_GEN): $(OPENCL_CL) mk/opencl.mk
	@mkdir -p $(@D)
	@{ echo "/* generated from the .cl files of kernels/opencl by mk/opencl.mk: do not edit */"; \
	  echo "static const char *const rc_opencl_sources[] = {"; \
	  for f in $(OPENCL_CL); do \
	    echo "/* $$f */"; \
	    sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $$f; \
	    echo ","; \
	  done; \
	  echo "};"; } > $@.tmp && mv $@.tmp $@
