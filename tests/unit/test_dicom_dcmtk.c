/*
 * Tests of server/pacs/dicom_dcmtk.cc, checked by readers that are not DCMTK:
 * a non-square CT slice is written and read back with pydicom (pixels at the
 * extremes of int16, rescale applied, spacing, position, a UTF-8 name) and
 * validated with dicom3tools' dciodvfy (no "Error" line); UIDs are unique,
 * valid and under the root, bad roots are refused; C-STORE fails fast and
 * names the peer on a closed port, and, when DCMTK's storescp is installed,
 * stores against it (explicit VR, implicit VR only, a refusal, a timeout).
 * A missing python3/pydicom, dciodvfy or storescp skips that check.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pacs/dicom_dcmtk.h"
#include "util/rc_clock.h"
#include "util/rc_error.h"

#define PYTHON "/usr/bin/python3"
#define DCIODVFY "/usr/bin/dciodvfy"
#define STORESCP "/usr/bin/storescp"
#define ROOT "1.2.826.0.1.3680043.10.999"

enum { ROWS = 3, COLS = 5 };

static const int16_t pixels[ROWS * COLS] = {
	-32768, 32767, 0, -1, 1, 1000, -1000, 12345, -12345, 2, 3, -3, 7, -7, 255,
};

static const rc_dcm_patient patient = {
	.patient_id = "RC-0042",
	.patient_name = "Müller^Jürgen",
	.patient_birth_date = "19700101",
	.patient_sex = "M",
	.accession_number = "A123",
	.study_description = "recond unit test",
	.series_description = "FDK ram-lak",
	.referring_physician = NULL,
	.institution = "",
};

/* A temporary directory for the test's files, removed by the teardown. */
static char dir[64];

static int setup(void **state)
{
	(void)state;
	strcpy(dir, "/tmp/test_dicom_dcmtk.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* A slice with DS values that need care: more digits than 16 characters
 * hold, a cosine that prints with an exponent. */
static rc_dcm_ct_slice slice(void)
{
	rc_dcm_ct_slice s = {
		.patient = &patient,
		.study_uid = ROOT ".1.1",
		.series_uid = ROOT ".1.2",
		.sop_uid = ROOT ".1.3",
		.frame_uid = ROOT ".1.4",
		.date = "20240229",
		.time = "235959",
		.study_id = "7",
		.series_number = 3,
		.instance_number = 2,
		.rows = ROWS,
		.cols = COLS,
		.pixel_spacing = { 0.48828125, 0.7 },
		.slice_thickness = 1.0 / 3.0,
		.position = { -125.25, -97.123456789012345, 33.333333333333336 },
		.orientation = { 1, 6.123233995736766e-17, 0, 0, 1, -0.0 },
		.slice_location = 33.333333333333336,
		.window_center = 40,
		.window_width = 400,
		.rescale_slope = 0.5,
		.rescale_intercept = -1024,
		.convolution_kernel = "RAM-LAK",
		.derivation = "recond fdk ram-lak",
		.software = "recond 0.9",
		.pixels = pixels,
	};
	return s;
}

static void write_sample(char *path, size_t n)
{
	snprintf(path, n, "%s/ct.dcm", dir);
	rc_dcm_ct_slice s = slice();
	rc_err e = { 0 };
	int rc = rc_dcm_write_ct(&s, path, &e);
	if (rc)
		print_error("rc_dcm_write_ct: %s\n", e.msg);
	assert_int_equal(rc, 0);
}

/* Skips the calling test when the program at path is not installed. */
static void need_tool(const char *path, const char *package)
{
	if (access(path, X_OK) != 0) {
		print_message("SKIP: %s is missing (%s)\n", path, package);
		skip();
	}
}

static int have_pydicom(void)
{
	return access(PYTHON, X_OK) == 0 &&
	       system(PYTHON " -c 'import pydicom' >/dev/null 2>&1") == 0;
}

/* pydicom reads what DCMTK wrote: geometry, the name (UTF-8), every pixel
 * and the rescale it applies (HU = value * slope + intercept). */
static void test_write_read_pydicom(void **state)
{
	(void)state;
	if (!have_pydicom()) {
		print_message("SKIP: %s cannot import pydicom (python3-pydicom)\n", PYTHON);
		skip();
	}
	char path[128];
	write_sample(path, sizeof path);

	char cmd[2048];
	snprintf(cmd, sizeof cmd,
		 "PYTHONIOENCODING=utf-8 " PYTHON " -c '\n"
		 "import struct, sys, pydicom\n"
		 "d = pydicom.dcmread(sys.argv[1])\n"
		 "print(d.file_meta.TransferSyntaxUID, d.SOPClassUID, d.Modality)\n"
		 "try:\n"
		 "    import numpy\n"
		 "    from pydicom.pixel_data_handlers.util import apply_modality_lut\n"
		 "except ImportError:\n"
		 "    numpy = None\n"
		 "if numpy:\n"
		 "    a = d.pixel_array\n"
		 "    v, hu, shape, dt = a.flatten(), apply_modality_lut(a, d).flatten(), a.shape, a.dtype\n"
		 "else:\n"
		 "    sys.stderr.write(\"no numpy (python3-numpy): PixelData decoded by hand\\n\")\n"
		 "    v = struct.unpack(\"<%%dh\" %% (len(d.PixelData) // 2), d.PixelData)\n"
		 "    hu = [x * float(d.RescaleSlope) + float(d.RescaleIntercept) for x in v]\n"
		 "    shape, dt = (d.Rows, d.Columns), \"int16\" if d.PixelRepresentation else \"uint16\"\n"
		 "print(d.Rows, d.Columns, shape[0], shape[1], dt)\n"
		 "print(\" \".join(str(int(x)) for x in v))\n"
		 "print(\" \".join(repr(float(x)) for x in hu))\n"
		 "print(\" \".join(repr(float(v)) for v in d.PixelSpacing))\n"
		 "print(\" \".join(repr(float(v)) for v in d.ImagePositionPatient))\n"
		 "print(d.PatientName)\n"
		 "' '%s' ",
		 path);
	FILE *f = popen(cmd, "r");
	assert_non_null(f);
	char out[4096];
	size_t len = fread(out, 1, sizeof out - 1, f);
	out[len] = '\0';
	int st = pclose(f);
	if (st != 0)
		print_error("pydicom failed:\n%s\n", out);
	assert_int_equal(st, 0);

	char *save = NULL;
	char *line = strtok_r(out, "\n", &save);
	assert_non_null(line);
	assert_string_equal(line, "1.2.840.10008.1.2.1 1.2.840.10008.5.1.4.1.1.2 CT");

	line = strtok_r(NULL, "\n", &save);
	assert_non_null(line);
	assert_string_equal(line, "3 5 3 5 int16");

	line = strtok_r(NULL, "\n", &save);
	assert_non_null(line);
	char *p = line;
	for (int i = 0; i < ROWS * COLS; i++) {
		char *end;
		long v = strtol(p, &end, 10);
		assert_true(end != p);
		assert_int_equal(v, pixels[i]);
		p = end;
	}

	line = strtok_r(NULL, "\n", &save);
	assert_non_null(line);
	p = line;
	for (int i = 0; i < ROWS * COLS; i++) {
		char *end;
		double hu = strtod(p, &end);
		assert_true(end != p);
		assert_true(hu == pixels[i] * 0.5 - 1024.0);
		p = end;
	}

	/* DS keeps at most 16 characters: compare to what that many digits hold. */
	line = strtok_r(NULL, "\n", &save);
	assert_non_null(line);
	double sp[2];
	assert_int_equal(sscanf(line, "%lf %lf", &sp[0], &sp[1]), 2);
	assert_true(sp[0] == 0.48828125);
	assert_true(sp[1] == 0.7);

	line = strtok_r(NULL, "\n", &save);
	assert_non_null(line);
	double pos[3];
	assert_int_equal(sscanf(line, "%lf %lf %lf", &pos[0], &pos[1], &pos[2]), 3);
	assert_true(pos[0] == -125.25);
	assert_true(fabs(pos[1] - -97.123456789012345) < 1e-12);
	assert_true(fabs(pos[2] - 33.333333333333336) < 1e-12);

	line = strtok_r(NULL, "\n", &save);
	assert_non_null(line);
	assert_string_equal(line, "Müller^Jürgen");
}

/* dicom3tools' validator: warnings may stay, an "Error" line may not. */
static void test_dciodvfy(void **state)
{
	(void)state;
	need_tool(DCIODVFY, "dicom3tools");
	char path[128];
	write_sample(path, sizeof path);
	char cmd[256];
	snprintf(cmd, sizeof cmd, DCIODVFY " '%s' 2>&1", path);
	FILE *f = popen(cmd, "r");
	assert_non_null(f);
	char line[1024];
	int errors = 0, lines = 0;
	while (fgets(line, sizeof line, f)) {
		lines++;
		if (!strncmp(line, "Error", 5)) {
			errors++;
			print_error("dciodvfy: %s", line);
		} else {
			print_message("dciodvfy: %s", line);
		}
	}
	pclose(f);
	assert_true(lines > 0); /* it ran: it names the IOD at least */
	assert_int_equal(errors, 0);
}

/* What the writer refuses, and where it cannot write. */
static void test_write_refusals(void **state)
{
	(void)state;
	char path[128];
	snprintf(path, sizeof path, "%s/bad.dcm", dir);
	rc_err e = { 0 };

	rc_dcm_ct_slice s = slice();
	s.sop_uid = NULL;
	assert_int_equal(rc_dcm_write_ct(&s, path, &e), RC_EINVAL);
	assert_non_null(strstr(e.msg, "SOPInstanceUID"));

	s = slice();
	s.pixel_spacing[1] = NAN;
	assert_int_equal(rc_dcm_write_ct(&s, path, &e), RC_EINVAL);
	assert_non_null(strstr(e.msg, "PixelSpacing"));

	s = slice();
	s.study_uid = "1.2.x";
	assert_int_equal(rc_dcm_write_ct(&s, path, &e), RC_EINVAL);
	assert_non_null(strstr(e.msg, "StudyInstanceUID"));

	s = slice();
	s.date = "2024-02-29";
	assert_int_equal(rc_dcm_write_ct(&s, path, &e), RC_EINVAL);
	assert_non_null(strstr(e.msg, "StudyDate"));

	s = slice();
	s.rows = 0;
	assert_int_equal(rc_dcm_write_ct(&s, path, &e), RC_EINVAL);
	assert_int_equal(access(path, F_OK), -1);

	s = slice();
	char nodir[160];
	snprintf(nodir, sizeof nodir, "%s/no/such/dir/ct.dcm", dir);
	assert_int_equal(rc_dcm_write_ct(&s, nodir, &e), RC_EIO);
	assert_non_null(strstr(e.msg, nodir));
}

static int uid_valid(const char *u)
{
	size_t n = strlen(u);
	if (n < 1 || n > 64)
		return 0;
	const char *comp = u;
	for (const char *p = u;; p++) {
		if (*p == '.' || !*p) {
			if (p == comp || (p - comp > 1 && *comp == '0'))
				return 0;
			if (!*p)
				return 1;
			comp = p + 1;
		} else if (*p < '0' || *p > '9') {
			return 0;
		}
	}
}

static int cmp_uid(const void *a, const void *b)
{
	return strcmp(a, b);
}

static void test_uid(void **state)
{
	(void)state;
	enum { N = 2000 };
	static char uids[N][65];
	rc_err e = { 0 };
	/* Under the test root, under DCMTK's (""), and under a 40-character
	 * root, the longest allowed. */
	static const char *const roots[] = { ROOT, "", "1.2.826.0.1.3680043.10.999.1234567890.12" };
	for (size_t r = 0; r < sizeof roots / sizeof roots[0]; r++) {
		const char *want = *roots[r] ? roots[r] : "1.2.276.0.7230010.3";
		for (int i = 0; i < N; i++) {
			int rc = rc_dcm_uid(roots[r], uids[i], sizeof uids[i], &e);
			if (rc)
				print_error("rc_dcm_uid(%s): %s\n", roots[r], e.msg);
			assert_int_equal(rc, 0);
			if (!uid_valid(uids[i]))
				print_error("invalid UID %s\n", uids[i]);
			assert_true(uid_valid(uids[i]));
			assert_memory_equal(uids[i], want, strlen(want));
			assert_int_equal(uids[i][strlen(want)], '.');
		}
		print_message("rc_dcm_uid(\"%s\"): %s\n", roots[r], uids[0]);
		qsort(uids, N, sizeof uids[0], cmp_uid);
		for (int i = 1; i < N; i++)
			assert_string_not_equal(uids[i - 1], uids[i]);
	}

	static const char *const bad[] = {
		"1.02.3", "1..2", "1.2.", ".1.2", "1.2a", "1.2.826.0.1.3680043.10.999.1234567890.123",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char out[65];
		assert_int_equal(rc_dcm_uid(bad[i], out, sizeof out, &e), RC_EINVAL);
	}
	char small[64];
	assert_int_equal(rc_dcm_uid(ROOT, small, sizeof small, &e), RC_EINVAL);
}

/* A loopback port nobody listens on: bound to port 0, then closed. */
static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	socklen_t len = sizeof a;
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	return ntohs(a.sin_port);
}

static void test_cstore_closed_port(void **state)
{
	(void)state;
	int port = free_port();
	rc_dcm_cstore *c = (rc_dcm_cstore *)0x1;
	rc_err e = { 0 };
	double t0 = rc_now_s();
	int rc = rc_dcm_cstore_open("127.0.0.1", port, "ORTHANC", "RECOND", 3, &c, &e);
	double dt = rc_now_s() - t0;
	print_message("closed port %d: %.3f s, %s\n", port, dt, e.msg);
	assert_int_equal(rc, RC_EIO);
	assert_true(c == (rc_dcm_cstore *)0x1); /* untouched on failure */
	assert_true(dt < 3.5);
	char want[32];
	snprintf(want, sizeof want, "127.0.0.1:%d", port);
	assert_non_null(strstr(e.msg, want));

	assert_int_equal(rc_dcm_cstore_open("127.0.0.1", 0, "A", "B", 3, &c, &e), RC_EINVAL);
	assert_int_equal(rc_dcm_cstore_open("127.0.0.1", port, "", "B", 3, &c, &e), RC_EINVAL);
	assert_int_equal(rc_dcm_cstore_open("127.0.0.1", port, "A", "THIS-AE-IS-TOO-LONG", 3, &c, &e),
			 RC_EINVAL);
	rc_dcm_cstore_close(NULL);
}

/* --- against DCMTK's storescp ------------------------------------------- */

static pid_t scp_pid;

/* Starts storescp on a free port with its output in outdir and extra
 * arguments; waits until it accepts TCP connections. */
static int start_storescp(const char *outdir, const char *const *extra)
{
	int port = free_port();
	char portstr[16];
	snprintf(portstr, sizeof portstr, "%d", port);
	const char *argv[16] = { STORESCP, "-aet", "PACS", "-od", outdir };
	int n = 5;
	for (; extra && *extra; extra++)
		argv[n++] = *extra;
	argv[n++] = portstr;
	argv[n] = NULL;
	scp_pid = fork();
	assert_true(scp_pid >= 0);
	if (scp_pid == 0) {
		int null = open("/dev/null", O_RDWR);
		dup2(null, 1);
		dup2(null, 2);
		execv(STORESCP, (char *const *)argv);
		_exit(127);
	}
	for (int i = 0; i < 100; i++) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
		close(fd);
		if (ok)
			return port;
		usleep(50000);
	}
	fail_msg("storescp did not listen on %d", port);
	return -1;
}

static void stop_storescp(void)
{
	if (scp_pid > 0) {
		kill(scp_pid, SIGTERM);
		waitpid(scp_pid, NULL, 0);
		scp_pid = 0;
	}
}

static int count_files(const char *d)
{
	DIR *dp = opendir(d);
	if (!dp)
		return -1;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(dp)))
		n += de->d_name[0] != '.';
	closedir(dp);
	return n;
}

/* Stores the sample twice on one association, with storescp accepting
 * explicit VR (its default) or implicit VR only (then DCMTK converts). */
static void test_cstore_storescp(void **state)
{
	(void)state;
	need_tool(STORESCP, "dcmtk");
	char path[128];
	write_sample(path, sizeof path);
	static const char *const implicit_only[] = { "+xi", NULL };
	const char *const *modes[] = { NULL, implicit_only };
	for (int m = 0; m < 2; m++) {
		char out[160];
		snprintf(out, sizeof out, "%s/scp%d", dir, m);
		assert_int_equal(mkdir(out, 0700), 0);
		int port = start_storescp(out, modes[m]);
		rc_dcm_cstore *c = NULL;
		rc_err e = { 0 };
		int rc = rc_dcm_cstore_open("127.0.0.1", port, "PACS", "RECOND", 5, &c, &e);
		if (rc)
			print_error("open: %s\n", e.msg);
		assert_int_equal(rc, 0);
		for (int i = 0; i < 2; i++) {
			rc = rc_dcm_cstore_send(c, path, &e);
			if (rc)
				print_error("send: %s\n", e.msg);
			assert_int_equal(rc, 0);
		}
		/* Not a DICOM file: refused before anything goes out. */
		char junk[160];
		snprintf(junk, sizeof junk, "%s/junk", dir);
		FILE *f = fopen(junk, "w");
		assert_non_null(f);
		fputs("not dicom", f);
		fclose(f);
		assert_true(rc_dcm_cstore_send(c, junk, &e) < 0);
		assert_non_null(strstr(e.msg, junk));
		rc_dcm_cstore_close(c);
		stop_storescp();
		/* Both sends stored the same SOP instance: one file. */
		assert_int_equal(count_files(out), 1);
	}
}

/* A refused association names the peer and DCMTK's reason. */
static void test_cstore_refused(void **state)
{
	(void)state;
	need_tool(STORESCP, "dcmtk");
	static const char *const refuse[] = { "--refuse", NULL };
	int port = start_storescp(dir, refuse);
	rc_dcm_cstore *c = NULL;
	rc_err e = { 0 };
	int rc = rc_dcm_cstore_open("127.0.0.1", port, "PACS", "RECOND", 5, &c, &e);
	stop_storescp();
	print_message("refused: %s\n", e.msg);
	assert_int_equal(rc, RC_EIO);
	assert_null(c);
	char want[32];
	snprintf(want, sizeof want, "127.0.0.1:%d", port);
	assert_non_null(strstr(e.msg, want));
	assert_non_null(strstr(e.msg, "rejected"));
	assert_non_null(strstr(e.msg, "Reason"));
}

/* A peer that answers late: the send fails after about timeout_s and
 * aborts the association, so that nothing after it waits again. */
static void test_cstore_timeout(void **state)
{
	(void)state;
	need_tool(STORESCP, "dcmtk");
	char path[128];
	write_sample(path, sizeof path);
	static const char *const slow[] = { "--sleep-during", "5", "--ignore", NULL };
	int port = start_storescp(dir, slow);
	rc_dcm_cstore *c = NULL;
	rc_err e = { 0 };
	assert_int_equal(rc_dcm_cstore_open("127.0.0.1", port, "PACS", "RECOND", 1, &c, &e), 0);
	double t0 = rc_now_s();
	int rc = rc_dcm_cstore_send(c, path, &e);
	double dt = rc_now_s() - t0;
	print_message("slow peer: %.3f s, %s\n", dt, e.msg);
	assert_int_equal(rc, RC_EIO);
	/* timeout_s for the answer, then up to timeout_s more for the abort. */
	assert_true(dt > 0.9 && dt < 4.0);
	/* The association is gone: no second wait, and close is quick. */
	t0 = rc_now_s();
	assert_int_equal(rc_dcm_cstore_send(c, path, &e), RC_EIO);
	print_message("after the timeout: %s\n", e.msg);
	assert_non_null(strstr(e.msg, "closed"));
	rc_dcm_cstore_close(c);
	dt = rc_now_s() - t0;
	print_message("send + close after the timeout: %.3f s\n", dt);
	stop_storescp();
	assert_true(dt < 1.0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_write_read_pydicom),
		cmocka_unit_test(test_dciodvfy),
		cmocka_unit_test(test_write_refusals),
		cmocka_unit_test(test_uid),
		cmocka_unit_test(test_cstore_closed_port),
		cmocka_unit_test(test_cstore_storescp),
		cmocka_unit_test(test_cstore_refused),
		cmocka_unit_test(test_cstore_timeout),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
