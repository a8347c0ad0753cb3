/*
 * get: download a job's volume.  The format comes from --format or the
 * output's extension; the bytes go to OUT.part, which is renamed to OUT only
 * once the whole answer arrived, so OUT is never a truncated volume.  Every
 * format is one plain GET streamed to the file (no Range): dicom is a ZIP of
 * the series that the daemon sends chunked, with no length known in advance.
 */
#include "rctl_cmd.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

static const char *format_of(const char *out)
{
	static const struct { const char *ext, *fmt; } map[] = {
		{ ".nii", "nifti" }, { ".mha", "mha" }, { ".raw", "raw" },
		{ ".f32", "raw" }, { ".bin", "raw" }, { ".zip", "dicom" },
	};
	const char *dot = strrchr(out, '.');
	if (!dot)
		return NULL;
	for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
		if (!strcasecmp(dot, map[i].ext))
			return map[i].fmt;
	return NULL;
}

int rctl_cmd_get(rctl_conn *c, const rctl_args *a)
{
	const char *fmt = a->format;
	int to_stdout = !strcmp(a->output, "-");
	if (!fmt && !to_stdout)
		fmt = format_of(a->output);
	if (!fmt) {
		fprintf(stderr, "reconctl: say --format raw|nifti|mha|dicom (the output name %s does not tell)\n",
			a->output);
		return RCTL_EXIT_USAGE;
	}
	if (strcmp(fmt, "raw") && strcmp(fmt, "nifti") && strcmp(fmt, "mha") && strcmp(fmt, "dicom")) {
		fprintf(stderr, "reconctl: --format must be raw, nifti, mha or dicom (got %s)\n", fmt);
		return RCTL_EXIT_USAGE;
	}

	int ex = RCTL_EXIT_SERVER;
	char path[160];
	char *part = NULL;
	FILE *out = stdout;
	rctl_fail f;
	uint64_t bytes = 0;
	if (!to_stdout) {
		size_t n = strlen(a->output) + 6;
		part = malloc(n);
		if (!part) {
			fprintf(stderr, "reconctl: out of memory\n");
			return RCTL_EXIT_SERVER;
		}
		snprintf(part, n, "%s.part", a->output);
		out = fopen(part, "wbe");
		if (!out) {
			fprintf(stderr, "reconctl: cannot create %s: %s\n", part, strerror(errno));
			ex = RCTL_EXIT_USAGE;
			goto out_free;
		}
	}
	rctl_progress pb;
	rctl_progress_init(&pb, "download", rctl_show_progress(a));
	snprintf(path, sizeof path, "/v1/jobs/%s/volume?format=%s", a->pos[0], fmt);
	int rc = rctl_download(c, path, out, &pb, &bytes, &f);
	if (!to_stdout) {
		if (fclose(out) != 0 && rc == 0) {
			rctl_fail_set(&f, 0, "write_error", "closing %s failed: %s", part, strerror(errno));
			rc = -1;
		}
		if (rc == 0 && rename(part, a->output) < 0) {
			rctl_fail_set(&f, 0, "write_error", "renaming %s failed: %s", part, strerror(errno));
			rc = -1;
		}
		if (rc < 0)
			unlink(part);
	} else {
		fflush(stdout);
	}
	if (rc < 0) {
		rctl_fail_print(&f);
		ex = rctl_fail_exit(&f);
		goto out_free;
	}
	if (a->json) {
		json_t *j = json_pack("{s:s, s:s, s:I}", "file", a->output, "format", fmt,
				      "bytes", (json_int_t)bytes);
		if (to_stdout)
			fprintf(stderr, "%llu bytes\n", (unsigned long long)bytes);
		else
			rctl_print_json(j);
		json_decref(j);
	} else if (!to_stdout && !a->quiet) {
		fprintf(stderr, "reconctl: wrote %s (%s, %llu bytes)\n", a->output, fmt,
			(unsigned long long)bytes);
	}
	ex = RCTL_EXIT_OK;
out_free:
	free(part);
	return ex;
}
