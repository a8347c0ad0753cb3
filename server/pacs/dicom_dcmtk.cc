/*
 * dicom_dcmtk: the C API of dicom_dcmtk.h over DCMTK 3.6.7 (dcmdata for the
 * files and UIDs, dcmnet's DcmSCU for C-STORE).
 *
 * How the parts fit: every entry point is extern "C", catches every C++
 * exception and turns DCMTK's OFCondition into an rc_code and a sentence
 * that names the attribute, the file or the peer.  dcmtk_init() runs once:
 * it switches DCMTK's own logging off (the root logger at OFF, so nothing
 * reaches stdout/stderr and no dump with patient data reaches the daemon's
 * log) and hangs a private appender on the "dcmtk.dcmnet" logger that keeps
 * only the reason of an association rejection: DcmSCU reports that reason
 * (called AE title not recognised, ...) only as a debug message, and an
 * operator needs it to fix a PACS configuration.  That logger is raised to
 * DEBUG only while an association is negotiated; additivity is off, so its
 * messages never reach the root's console appender.
 *
 * Process-wide side effects of DCMTK, for the caller to know: the connection
 * timeout is a global of dcmnet (the last rc_dcm_cstore_open's timeout_s
 * applies to every connect), and DCMTK's network layer sets SIGPIPE to
 * SIG_IGN the first time it initialises.
 */
#include "pacs/dicom_dcmtk.h"

#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>

#include <dcmtk/config/osconfig.h>

#include <dcmtk/dcmdata/dcdict.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcuid.h>
#include <dcmtk/dcmdata/dcvrui.h>
#include <dcmtk/dcmdata/dcxfer.h>
#include <dcmtk/dcmnet/diutil.h>
#include <dcmtk/dcmnet/scu.h>
#include <dcmtk/oflog/oflog.h>
#include <dcmtk/oflog/appender.h>
#include <dcmtk/oflog/spi/logevent.h>

namespace {

/* --- DCMTK's logging ---------------------------------------------------- */

/* The reason of the last association rejection seen by this thread. */
thread_local std::string reject_reason;

/* Keeps the text after "Association Rejected:" (DcmSCU::negotiateAssociation
 * logs ASC_printRejectParameters there at debug level); drops the rest. */
class RejectCatcher : public dcmtk::log4cplus::Appender {
public:
	RejectCatcher() {}
	~RejectCatcher() override { destructorImpl(); }
	void close() override {}

protected:
	void append(const dcmtk::log4cplus::spi::InternalLoggingEvent &ev) override
	{
		static const char key[] = "Association Rejected:";
		const char *m = ev.getMessage().c_str();
		const char *p = strstr(m, key);
		if (!p)
			return;
		std::string r;
		for (p += sizeof key - 1; *p; p++) {
			if (*p == '\n' || *p == '\r') {
				if (!r.empty() && r.back() != ' ')
					r += ", ";
				continue;
			}
			r += *p;
		}
		while (!r.empty() && (r.back() == ' ' || r.back() == ','))
			r.pop_back();
		reject_reason = r;
	}
};

std::once_flag init_once;
std::mutex net_debug_mutex;
int net_debug_users;

void dcmtk_init()
{
	std::call_once(init_once, [] {
		OFLog::configure(OFLogger::OFF_LOG_LEVEL);
		OFLogger net = OFLog::getLogger(DCMNET_LOGGER_NAME);
		net.setAdditivity(false);
		net.removeAllAppenders();
		net.addAppender(dcmtk::log4cplus::SharedAppenderPtr(new RejectCatcher));
		net.setLogLevel(OFLogger::OFF_LOG_LEVEL);
	});
}

/* Raises dcmnet's logger to DEBUG for the life of the object (counted, so
 * that concurrent negotiations in several threads nest). */
class NetDebug {
public:
	NetDebug()
	{
		std::lock_guard<std::mutex> g(net_debug_mutex);
		if (net_debug_users++ == 0)
			OFLog::getLogger(DCMNET_LOGGER_NAME).setLogLevel(OFLogger::DEBUG_LOG_LEVEL);
	}
	~NetDebug()
	{
		std::lock_guard<std::mutex> g(net_debug_mutex);
		if (--net_debug_users == 0)
			OFLog::getLogger(DCMNET_LOGGER_NAME).setLogLevel(OFLogger::OFF_LOG_LEVEL);
	}
	NetDebug(const NetDebug &) = delete;
	NetDebug &operator=(const NetDebug &) = delete;
};

/* DCMTK's condition text on one line ("a; b" for a chain of conditions). */
std::string cond_text(const OFCondition &c)
{
	OFString s;
	DimseCondition::dump(s, c);
	std::string out;
	for (const char *p = s.c_str(); *p; p++) {
		if (*p != '\n' && *p != '\r')
			out += *p;
		else if (!out.empty() && out.back() != ' ')
			out += "; ";
	}
	while (!out.empty() && (out.back() == ' ' || out.back() == ';'))
		out.pop_back();
	return out;
}

int dict_check(rc_err *err)
{
	if (!dcmDataDict.isDictionaryLoaded())
		return rc_fail(err, RC_EIO, "",
			       "DCMTK's data dictionary is not loaded (DCMDICTPATH, default %s)",
			       DCM_DICT_DEFAULT_PATH);
	return 0;
}

/* --- values ------------------------------------------------------------- */

/* A DS value in at most 16 characters (PS3.5 6.2): the most significant
 * digits that fit, without locale (OFStandard::ftoa always writes '.'). */
bool ds_format(double v, char out[17])
{
	if (!std::isfinite(v))
		return false;
	char buf[64];
	for (int prec = 16; prec >= 1; prec--) {
		OFStandard::ftoa(buf, sizeof buf, v, 0, 0, prec);
		size_t n = strlen(buf);
		if (n <= 16) {
			memcpy(out, buf, n + 1);
			return true;
		}
	}
	return false;
}

struct Writer {
	DcmDataset *set;
	rc_err *err;

	/* Puts value (NULL = empty) and has DCMTK check it against its VR and
	 * vm; the message names the attribute, never the value (patient data). */
	int str(const DcmTagKey &key, const char *value, const char *vm = "1")
	{
		DcmTag tag(key);
		OFCondition c = set->putAndInsertString(tag, value ? value : "");
		if (c.bad())
			return rc_fail(err, RC_EINVAL, "", "DICOM %s: DCMTK refused the value: %s",
				       tag.getTagName(), c.text());
		DcmElement *e = nullptr;
		c = set->findAndGetElement(key, e);
		if (c.good() && e)
			c = e->checkValue(vm);
		if (c.bad())
			return rc_fail(err, RC_EINVAL, "", "DICOM %s: invalid value for VR %s: %s",
				       tag.getTagName(), tag.getVRName(), c.text());
		return 0;
	}

	/* A type 1 attribute: refuses NULL and "". */
	int str1(const DcmTagKey &key, const char *value)
	{
		if (!value || !*value)
			return rc_fail(err, RC_EINVAL, "", "DICOM %s: missing (type 1)",
				       DcmTag(key).getTagName());
		return str(key, value);
	}

	/* n decimal strings joined by backslashes. */
	int dec(const DcmTagKey &key, const double *v, int n)
	{
		std::string s;
		for (int i = 0; i < n; i++) {
			char one[17];
			if (!ds_format(v[i], one))
				return rc_fail(err, RC_EINVAL, "", "DICOM %s: value %d is not a finite number",
					       DcmTag(key).getTagName(), i + 1);
			if (i)
				s += '\\';
			s += one;
		}
		char vm[16];
		snprintf(vm, sizeof vm, "%d", n);
		return str(key, s.c_str(), vm);
	}

	int is(const DcmTagKey &key, int v)
	{
		char s[16];
		snprintf(s, sizeof s, "%d", v);
		return str(key, s);
	}

	int us(const DcmTagKey &key, unsigned v)
	{
		OFCondition c = set->putAndInsertUint16(key, (Uint16)v);
		if (c.bad())
			return rc_fail(err, RC_EINVAL, "", "DICOM %s: %s", DcmTag(key).getTagName(), c.text());
		return 0;
	}
};

#define TRY(x)                      \
	do {                        \
		int rc_ = (x);      \
		if (rc_ < 0)        \
			return rc_; \
	} while (0)

int fill_ct(const rc_dcm_ct_slice *s, DcmDataset *ds, rc_err *err)
{
	static const rc_dcm_patient nobody = {};
	const rc_dcm_patient *p = s->patient ? s->patient : &nobody;
	Writer w{ds, err};

	/* First: the checks of the other strings read it. */
	TRY(w.str(DCM_SpecificCharacterSet, "ISO_IR 192"));
	TRY(w.str(DCM_ImageType, "DERIVED\\SECONDARY\\AXIAL", "3"));
	TRY(w.str1(DCM_SOPClassUID, UID_CTImageStorage));
	TRY(w.str1(DCM_SOPInstanceUID, s->sop_uid));

	/* Patient */
	TRY(w.str(DCM_PatientName, p->patient_name));
	TRY(w.str(DCM_PatientID, p->patient_id));
	TRY(w.str(DCM_PatientBirthDate, p->patient_birth_date));
	TRY(w.str(DCM_PatientSex, p->patient_sex));

	/* General Study */
	TRY(w.str1(DCM_StudyInstanceUID, s->study_uid));
	TRY(w.str(DCM_StudyDate, s->date));
	TRY(w.str(DCM_StudyTime, s->time));
	TRY(w.str(DCM_ReferringPhysicianName, p->referring_physician));
	TRY(w.str(DCM_StudyID, s->study_id));
	TRY(w.str(DCM_AccessionNumber, p->accession_number));
	TRY(w.str(DCM_StudyDescription, p->study_description));

	/* General Series */
	TRY(w.str(DCM_Modality, "CT"));
	TRY(w.str1(DCM_SeriesInstanceUID, s->series_uid));
	TRY(w.is(DCM_SeriesNumber, s->series_number));
	TRY(w.str(DCM_SeriesDate, s->date));
	TRY(w.str(DCM_SeriesTime, s->time));
	TRY(w.str(DCM_SeriesDescription, p->series_description));
	/* Type 2C (paired body parts): empty, recond does not know the part. */
	TRY(w.str(DCM_Laterality, ""));
	TRY(w.str(DCM_PatientPosition, "HFS"));

	/* Frame of Reference */
	TRY(w.str1(DCM_FrameOfReferenceUID, s->frame_uid));
	TRY(w.str(DCM_PositionReferenceIndicator, ""));

	/* General Equipment */
	TRY(w.str(DCM_Manufacturer, "recond"));
	TRY(w.str(DCM_InstitutionName, p->institution));
	TRY(w.str(DCM_SoftwareVersions, s->software));

	/* General Image, Image Plane */
	TRY(w.is(DCM_InstanceNumber, s->instance_number));
	TRY(w.str(DCM_ContentDate, s->date));
	TRY(w.str(DCM_ContentTime, s->time));
	TRY(w.str(DCM_DerivationDescription, s->derivation));
	TRY(w.str(DCM_BurnedInAnnotation, "NO"));
	/* the job's warnings (LT, one value): a PACS viewer shows them */
	if (s->image_comments && s->image_comments[0])
		TRY(w.str(DCM_ImageComments, s->image_comments));
	TRY(w.dec(DCM_PixelSpacing, s->pixel_spacing, 2));
	TRY(w.dec(DCM_SliceThickness, &s->slice_thickness, 1));
	TRY(w.dec(DCM_SpacingBetweenSlices, &s->slice_thickness, 1));
	TRY(w.dec(DCM_ImagePositionPatient, s->position, 3));
	TRY(w.dec(DCM_ImageOrientationPatient, s->orientation, 6));
	TRY(w.dec(DCM_SliceLocation, &s->slice_location, 1));

	/* CT Image */
	TRY(w.str(DCM_KVP, ""));
	TRY(w.str(DCM_AcquisitionNumber, ""));
	if (s->convolution_kernel && *s->convolution_kernel)
		TRY(w.str(DCM_ConvolutionKernel, s->convolution_kernel));
	TRY(w.dec(DCM_RescaleIntercept, &s->rescale_intercept, 1));
	TRY(w.dec(DCM_RescaleSlope, &s->rescale_slope, 1));
	TRY(w.str(DCM_RescaleType, "HU"));

	/* VOI LUT */
	TRY(w.dec(DCM_WindowCenter, &s->window_center, 1));
	TRY(w.dec(DCM_WindowWidth, &s->window_width, 1));

	/* Image Pixel */
	TRY(w.us(DCM_SamplesPerPixel, 1));
	TRY(w.str(DCM_PhotometricInterpretation, "MONOCHROME2"));
	TRY(w.us(DCM_Rows, (unsigned)s->rows));
	TRY(w.us(DCM_Columns, (unsigned)s->cols));
	TRY(w.us(DCM_BitsAllocated, 16));
	TRY(w.us(DCM_BitsStored, 16));
	TRY(w.us(DCM_HighBit, 15));
	TRY(w.us(DCM_PixelRepresentation, 1));
	/* int16 and uint16 may alias; DCMTK writes them little endian. */
	unsigned long n = (unsigned long)s->rows * (unsigned long)s->cols;
	OFCondition c = ds->putAndInsertUint16Array(DCM_PixelData,
						    reinterpret_cast<const Uint16 *>(s->pixels), n);
	if (c.bad())
		return rc_fail(err, c == EC_MemoryExhausted ? RC_ENOMEM : RC_EINVAL, "",
			       "DICOM PixelData: %s", c.text());
	return 0;
}

bool uid_root_ok(const char *r)
{
	if (!*r)
		return false;
	const char *comp = r;
	for (const char *p = r;; p++) {
		if (*p == '.' || *p == '\0') {
			if (p == comp)
				return false; /* empty component */
			if (p - comp > 1 && *comp == '0')
				return false; /* leading zero */
			if (!*p)
				return true;
			comp = p + 1;
		} else if (*p < '0' || *p > '9') {
			return false;
		}
	}
}

} /* namespace */

/* --- writing ------------------------------------------------------------ */

extern "C" int rc_dcm_write_ct(const rc_dcm_ct_slice *s, const char *path, rc_err *err)
{
	try {
		dcmtk_init();
		if (!s || !path || !*path)
			return rc_fail(err, RC_EINVAL, "", "rc_dcm_write_ct: no slice or no path");
		if (s->rows < 1 || s->rows > 65535 || s->cols < 1 || s->cols > 65535)
			return rc_fail(err, RC_EINVAL, "", "DICOM Rows/Columns: %d x %d is not within 1..65535",
				       s->rows, s->cols);
		/* Pixel Data has a 32-bit length (PS3.5 7.1): at most 0xFFFFFFFE bytes. */
		if ((unsigned long long)s->rows * (unsigned long long)s->cols * 2 > 0xFFFFFFFEull)
			return rc_fail(err, RC_EINVAL, "", "DICOM PixelData: %d x %d pixels exceed 4 GiB",
				       s->rows, s->cols);
		if (!s->pixels)
			return rc_fail(err, RC_EINVAL, "", "DICOM PixelData: no pixels");
		int rc = dict_check(err);
		if (rc < 0)
			return rc;

		DcmFileFormat ff;
		rc = fill_ct(s, ff.getDataset(), err);
		if (rc < 0)
			return rc;
		OFCondition c = ff.saveFile(OFFilename(path), EXS_LittleEndianExplicit, EET_ExplicitLength,
					    EGL_withoutGL, EPD_noChange, 0, 0, EWM_fileformat);
		if (c.bad()) {
			/* A full disk is the client's 507 (docs/api.md), whatever DCMTK says. */
			int e = errno;
			/* Not a half-written instance a PACS could pick up. */
			unlink(path);
			return rc_fail(err, e == ENOSPC || e == EDQUOT ? RC_ENOSPACE : RC_EIO, "",
				       "cannot write DICOM file %s: %s", path, c.text());
		}
		return 0;
	} catch (const std::bad_alloc &) {
		return rc_fail(err, RC_ENOMEM, "", "out of memory writing DICOM file %s", path ? path : "");
	} catch (...) {
		return rc_fail(err, RC_EINTERNAL, "", "unexpected C++ exception writing DICOM file %s",
			       path ? path : "");
	}
}

/* --- UIDs --------------------------------------------------------------- */

/*
 * DCMTK's UID is root.host.pid.time.counter, each part up to 10 digits, and
 * DCMTK truncates it to 64 characters when the root is long (then the
 * counter, which makes it unique, is the first to go).  So the suffix is
 * made under a one-digit root and appended only when it fits whole; when it
 * does not, the suffix is as many digits of a 128-bit random number as fit
 * (23 at least under a 40-character root: about 76 bits, the same idea as a
 * 2.25 UUID-derived UID).
 */
extern "C" int rc_dcm_uid(const char *root, char *out, size_t n, rc_err *err)
{
	try {
		dcmtk_init();
		if (!out || n < 65)
			return rc_fail(err, RC_EINVAL, "", "rc_dcm_uid: the buffer must hold 65 bytes");
		if (!root || !*root)
			root = SITE_INSTANCE_UID_ROOT;
		size_t rl = strlen(root);
		if (rl > 40)
			return rc_fail(err, RC_EINVAL, "",
				       "UID root %.48s%s is %zu characters: at most 40 leave room for a unique suffix",
				       root, rl > 48 ? "..." : "", rl);
		if (!uid_root_ok(root))
			return rc_fail(err, RC_EINVAL, "",
				       "UID root \"%.48s\" is not a UID: digits and dots, no empty component, "
				       "no leading zero",
				       root);

		char tmp[128];
		dcmGenerateUniqueIdentifier(tmp, "9");
		const char *suffix = tmp + 2; /* past "9." */
		std::string uid(root);
		uid += '.';
		if (tmp[0] == '9' && tmp[1] == '.' && rl + 1 + strlen(suffix) <= 64) {
			uid += suffix;
		} else {
			unsigned char b[16];
			size_t got = 0;
			while (got < sizeof b) {
				ssize_t r = getrandom(b + got, sizeof b - got, 0);
				if (r < 0 && errno == EINTR)
					continue;
				if (r < 0)
					return rc_fail(err, RC_EIO, "", "getrandom for a UID: %s", strerror(errno));
				got += (size_t)r;
			}
			unsigned __int128 x = 0;
			for (unsigned char c : b)
				x = x << 8 | c;
			x |= (unsigned __int128)1 << 127; /* 39 digits, the first not 0 */
			std::string dig;
			for (; x; x /= 10)
				dig.insert(dig.begin(), (char)('0' + (int)(x % 10)));
			uid += dig.substr(0, 64 - uid.size());
		}
		if (uid.size() > 64 || DcmUniqueIdentifier::checkStringValue(uid.c_str(), "1").bad() ||
		    !uid_root_ok(uid.c_str()))
			return rc_fail(err, RC_EINTERNAL, "", "made an invalid UID under root %s", root);
		memcpy(out, uid.c_str(), uid.size() + 1);
		return 0;
	} catch (const std::bad_alloc &) {
		return rc_fail(err, RC_ENOMEM, "", "out of memory making a UID");
	} catch (...) {
		return rc_fail(err, RC_EINTERNAL, "", "unexpected C++ exception making a UID");
	}
}

/* --- C-STORE ------------------------------------------------------------ */

struct rc_dcm_cstore {
	DcmSCU scu;
	std::string peer; /* host:port, for messages */
};

namespace {

bool ae_ok(const char *ae)
{
	size_t n = ae ? strlen(ae) : 0;
	if (n < 1 || n > 16)
		return false;
	bool blank = true;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)ae[i];
		if (ch < 0x20 || ch > 0x7e || ch == '\\')
			return false;
		blank = blank && ch == ' ';
	}
	return !blank;
}

} /* namespace */

extern "C" int rc_dcm_cstore_open(const char *host, int port, const char *called_ae, const char *calling_ae,
				  int timeout_s, rc_dcm_cstore **ret, rc_err *err)
{
	try {
		dcmtk_init();
		if (!ret)
			return rc_fail(err, RC_EINVAL, "", "rc_dcm_cstore_open: no ret");
		/* dcmnet keeps "host:port" in 64 bytes. */
		if (!host || !*host || strlen(host) > 57)
			return rc_fail(err, RC_EINVAL, "", "C-STORE peer host must be 1 to 57 characters");
		if (port < 1 || port > 65535)
			return rc_fail(err, RC_EINVAL, "", "C-STORE peer %s: port %d is not within 1..65535", host,
				       port);
		if (!ae_ok(called_ae) || !ae_ok(calling_ae))
			return rc_fail(err, RC_EINVAL, "",
				       "C-STORE peer %s:%d: AE titles must be 1 to 16 printable characters, no backslash",
				       host, port);
		if (timeout_s < 1)
			return rc_fail(err, RC_EINVAL, "", "C-STORE peer %s:%d: timeout %d s is not positive", host,
				       port, timeout_s);
		int rc = dict_check(err);
		if (rc < 0)
			return rc;

		/* Freed on every way out but success. */
		std::unique_ptr<rc_dcm_cstore> c(new rc_dcm_cstore);
		c->peer = std::string(host) + ":" + std::to_string(port);
		DcmSCU &scu = c->scu;
		scu.setPeerHostName(host);
		scu.setPeerPort((Uint16)port);
		scu.setPeerAETitle(called_ae);
		scu.setAETitle(calling_ae);
		scu.setConnectionTimeout(timeout_s);
		scu.setACSETimeout((Uint32)timeout_s);
		scu.setDIMSEBlockingMode(DIMSE_NONBLOCKING);
		scu.setDIMSETimeout((Uint32)timeout_s);
		/* Explicit first: a file is written so and goes out unconverted. */
		OFList<OFString> ts;
		ts.push_back(UID_LittleEndianExplicitTransferSyntax);
		ts.push_back(UID_LittleEndianImplicitTransferSyntax);
		OFCondition cond = scu.addPresentationContext(UID_CTImageStorage, ts);
		if (cond.good())
			cond = scu.initNetwork();
		if (cond.bad())
			return rc_fail(err, RC_EIO, "", "C-STORE peer %s: cannot set up the association: %s",
				       c->peer.c_str(), cond_text(cond).c_str());
		reject_reason.clear();
		{
			NetDebug on;
			cond = scu.negotiateAssociation();
		}
		if (cond == DUL_ASSOCIATIONREJECTED)
			return rc_fail(err, RC_EIO, "",
				       "C-STORE peer %s (called AE %s, calling AE %s) rejected the association: %s",
				       c->peer.c_str(), called_ae, calling_ae,
				       reject_reason.empty() ? cond_text(cond).c_str() : reject_reason.c_str());
		if (cond == NET_EC_NoAcceptablePresentationContexts)
			return rc_fail(err, RC_EIO, "",
				       "C-STORE peer %s accepted no presentation context for CT Image Storage "
				       "(explicit or implicit VR little endian)",
				       c->peer.c_str());
		if (cond.bad())
			return rc_fail(err, RC_EIO, "", "C-STORE peer %s: association failed: %s", c->peer.c_str(),
				       cond_text(cond).c_str());
		*ret = c.release();
		return 0;
	} catch (const std::bad_alloc &) {
		return rc_fail(err, RC_ENOMEM, "", "out of memory opening a C-STORE association");
	} catch (...) {
		return rc_fail(err, RC_EINTERNAL, "", "unexpected C++ exception opening a C-STORE association");
	}
}

extern "C" int rc_dcm_cstore_send(rc_dcm_cstore *c, const char *path, rc_err *err)
{
	try {
		if (!c || !path || !*path)
			return rc_fail(err, RC_EINVAL, "", "rc_dcm_cstore_send: no association or no path");
		if (!c->scu.isConnected())
			return rc_fail(err, RC_EIO, "", "C-STORE peer %s: the association is closed",
				       c->peer.c_str());
		DcmFileFormat ff;
		OFCondition cond = ff.loadFile(OFFilename(path));
		if (cond.bad())
			return rc_fail(err, RC_EIO, "", "cannot read DICOM file %s: %s", path, cond.text());
		DcmDataset *ds = ff.getDataset();
		OFString sop_class;
		if (ds->findAndGetOFString(DCM_SOPClassUID, sop_class).bad() || sop_class.empty())
			return rc_fail(err, RC_EINVAL, "", "DICOM file %s has no SOPClassUID", path);
		DcmXfer xfer(ds->getOriginalXfer());
		T_ASC_PresentationContextID pc = c->scu.findAnyPresentationContextID(sop_class, xfer.getXferID());
		if (pc == 0)
			return rc_fail(err, RC_EIO, "",
				       "C-STORE peer %s: no accepted presentation context for %s in %s (%s)",
				       c->peer.c_str(), path, dcmFindNameOfUID(sop_class.c_str(), sop_class.c_str()),
				       xfer.getXferName());
		/* Converts explicit to implicit VR when the peer took only that. */
		c->scu.setDatasetConversionMode(OFTrue);
		Uint16 status = 0;
		cond = c->scu.sendSTORERequest(pc, OFFilename(), ds, status);
		if (cond.bad()) {
			/* A timeout or a broken connection leaves the association in
			 * an unknown state (a late answer would meet the next request):
			 * abort it, so that what follows fails at once. */
			std::string why = cond_text(cond);
			if (c->scu.isConnected())
				c->scu.abortAssociation();
			return rc_fail(err, RC_EIO, "", "C-STORE of %s to %s failed (association aborted): %s", path,
				       c->peer.c_str(), why.c_str());
		}
		if (status == 0x0000 || status == 0xB000 || status == 0xB006 || status == 0xB007)
			return 0;
		return rc_fail(err, RC_EIO, "", "C-STORE of %s to %s: peer answered status 0x%04X (%s)", path,
			       c->peer.c_str(), (unsigned)status, DU_cstoreStatusString(status));
	} catch (const std::bad_alloc &) {
		return rc_fail(err, RC_ENOMEM, "", "out of memory sending %s", path ? path : "");
	} catch (...) {
		return rc_fail(err, RC_EINTERNAL, "", "unexpected C++ exception sending %s", path ? path : "");
	}
}

extern "C" void rc_dcm_cstore_close(rc_dcm_cstore *c)
{
	if (!c)
		return;
	try {
		if (c->scu.isConnected() && c->scu.releaseAssociation().bad() && c->scu.isConnected())
			c->scu.abortAssociation();
	} catch (...) {
	}
	try {
		delete c;
	} catch (...) {
	}
}
